package chaos

import (
	"fmt"
	"testing"
	"time"
)

// neighbourSample runs `true` in the neighbour sandbox, one call after another, until stop
// closes (or n calls when stop is nil); it returns the latencies of the successes and the
// number of failures.
func neighbourSample(b *api, id string, n int, stop <-chan struct{}) (lat []time.Duration, errs int) {
	for i := 0; stop != nil || i < n; i++ {
		if stop != nil {
			select {
			case <-stop:
				return lat, errs
			default:
			}
		}
		r := b.shell(id, "true", 30)
		if r.Status == 200 && r.Get("success") == true {
			lat = append(lat, r.Took)
		} else {
			errs++
			time.Sleep(100 * time.Millisecond)
		}
	}
	return lat, errs
}

func summary(r resp) string {
	if r.Err != nil {
		return "no answer: " + r.Err.Error()
	}
	if r.Status == 200 {
		out := r.Str("output")
		if len(out) > 60 {
			out = out[len(out)-60:]
		}
		return fmt.Sprintf("200 success=%v exit=%v %q", r.Get("success"), r.Get("exit_code"), out)
	}
	return fmt.Sprintf("%d %s", r.Status, r.Str("error.code"))
}

// abusePhase runs each abuse in a sandbox of owner A while it measures owner B's neighbour.
func abusePhase(t *testing.T, rep *report, s settings, a, b *api, neighbour string) {
	abuses := []struct{ name, command string }{
		{"fork bomb", fmt.Sprintf("timeout %d bash -c ':(){ :|:& };:'; echo ended", s.ForkBombSeconds)},
		{"memory hog past 1 GiB", "timeout 20 python3 -c 'a=[]\nwhile True: a.append(bytearray(64<<20))'; echo exit=$?"},
		{"CPU spin on all cores", fmt.Sprintf("for i in $(seq $(nproc)); do timeout %d bash -c 'while :; do :; done' & done; wait; echo spun", int(s.AbuseWindow.Seconds()))},
		{fmt.Sprintf("%d MB file in /tmp", s.DiskMB), fmt.Sprintf("dd if=/dev/zero of=/tmp/chaos-big bs=1M count=%d 2>&1 | tail -1; rm -f /tmp/chaos-big; echo removed", s.DiskMB)},
		{"flood of background processes", "timeout 8 bash -c 'for i in $(seq 3000); do sleep 10 & done; wait' 2>&1 | tail -1; echo exit=$?"},
	}
	for _, ab := range abuses {
		// A fresh sandbox each time: what one abuse leaves running must not weigh on the next.
		x := a.createSandbox(t)
		a.shellOK(t, x, "true")
		// The neighbour's baseline right before the abuse, as long as half the window.
		stopBase := make(chan struct{})
		time.AfterFunc(s.AbuseWindow/2, func() { close(stopBase) })
		base, _ := neighbourSample(b, neighbour, 0, stopBase)
		stop := make(chan struct{})
		type sample struct {
			lat  []time.Duration
			errs int
		}
		got := make(chan sample, 1)
		go func() {
			lat, errs := neighbourSample(b, neighbour, 0, stop)
			got <- sample{lat, errs}
		}()
		began := time.Now()
		answer := a.shell(x, ab.command, 120)
		// Measure the neighbour for at least the window even when the abuse ends early.
		if rest := s.AbuseWindow - time.Since(began); rest > 0 {
			time.Sleep(rest)
		}
		close(stop)
		smp := <-got
		rec, last := untilSuccess(a, x, "echo alive", 120*time.Second)
		row := abuseRow{Name: ab.name, BaseP50: percentile(base, 0.5), BaseP99: percentile(base, 0.99),
			DuringP50: percentile(smp.lat, 0.5), DuringP99: percentile(smp.lat, 0.99),
			NeighbourCalls: len(smp.lat) + smp.errs, NeighbourErrors: smp.errs,
			AbuseAnswer:    fmt.Sprintf("%s after %v", summary(answer), answer.Took.Round(time.Millisecond)),
			RecoveredAfter: rec, RecoveryAnswer: summary(last)}
		rep.mu.Lock()
		rep.Abuse = append(rep.Abuse, row)
		rep.mu.Unlock()
		t.Logf("%s: neighbour p50/p99 %v/%v (before %v/%v), %d errors; abusive call %s; next success after %v",
			ab.name, row.DuringP50, row.DuringP99, row.BaseP50, row.BaseP99, smp.errs, row.AbuseAnswer, rec)
		if answer.Status >= 500 && answer.Status != 502 && answer.Status != 503 && answer.Status != 504 || answer.Status == 500 {
			rep.fail("abuse %s: the abusive call answered %s", ab.name, answer)
		}
		if smp.errs > 0 {
			rep.fail("abuse %s: the neighbour of another owner failed %d calls", ab.name, smp.errs)
		}
		if rec < 0 {
			rep.fail("abuse %s: the abusive sandbox did not answer within 120 s: %s", ab.name, last)
		}
		if r := a.do("DELETE", "/v1/sandboxes/"+x, nil, nil); r.Status != 204 {
			rep.fail("abuse %s: delete the abusive sandbox: %s", ab.name, r)
		} else {
			a.forget(x)
		}
	}
}
