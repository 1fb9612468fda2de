package chaos

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// loadPhase runs clients of both owners that create a sandbox, run a command, write and read a
// file and delete the sandbox, over and over, for the load duration.
func loadPhase(t *testing.T, rep *report, s settings, a, b *api) {
	var wg sync.WaitGroup
	began := time.Now()
	deadline := began.Add(s.LoadDuration)
	record := func(op string, r resp) bool {
		code := strconv.Itoa(r.Status)
		if r.Err != nil {
			code = "no answer"
		} else if c := r.Str("error.code"); c != "" {
			code += " " + c
		}
		rep.mu.Lock()
		defer rep.mu.Unlock()
		rep.Load.Ops++
		rep.Load.ByCode[code]++
		if r.Status >= 500 || r.Err != nil {
			rep.Load.FiveXX++
			rep.Failures = append(rep.Failures, fmt.Sprintf("load: %s answered %s", op, r))
		}
		ok := r.Err == nil && r.Status < 300
		if ok {
			rep.Load.PerOp[op] = append(rep.Load.PerOp[op], r.Took)
		}
		return ok
	}
	for i := range s.LoadClients {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				r := c.do("POST", "/v1/sandboxes", map[string]any{}, nil)
				if !record("create", r) {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				id := r.Str("id")
				body := fmt.Sprintf("client %d round %d", i, n)
				if record("shell exec (cold start)", c.shell(id, "echo "+strconv.Quote(body), 60)) {
					record("shell exec", c.shell(id, "cat /etc/hostname", 60))
					record("write file", c.do("PUT", "/v1/sandboxes/"+id+"/filesystem/files", map[string]any{"path": "f.txt", "content": body}, nil))
					rr := c.do("GET", "/v1/sandboxes/"+id+"/filesystem/files?path=f.txt", nil, nil)
					if record("read file", rr) && rr.Str("content") != body {
						rep.fail("load: read back %q, wrote %q", rr.Str("content"), body)
					}
				}
				if record("delete", c.do("DELETE", "/v1/sandboxes/"+id, nil, nil)) {
					c.forget(id)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	rep.mu.Lock()
	rep.Load.Clients, rep.Load.Duration = s.LoadClients, s.LoadDuration
	rep.Load.Throughput = float64(rep.Load.Ops) / took.Seconds()
	ops := rep.Load.Ops
	rep.mu.Unlock()
	t.Logf("load: %d operations in %v", ops, took.Round(time.Millisecond))
}
