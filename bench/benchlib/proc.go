package benchlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// RSS is a process's resident set size (VmRSS) in bytes; 0 when the process is gone.
func RSS(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS") }

// HWM is a process's peak resident set size (VmHWM) in bytes since it started.
func HWM(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM") }

// PeakRSS samples a process's VmRSS every interval until stop is called, which returns the
// highest value seen (a sample is also taken at start and at stop). VmHWM cannot be reset
// without privileges, so a peak during one phase is sampled.
func PeakRSS(pid int, interval time.Duration) (stop func() int64) {
	var peak atomic.Int64
	sample := func() {
		if v := RSS(pid); v > peak.Load() {
			peak.Store(v)
		}
	}
	sample()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		sample()
		return peak.Load()
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Proc is a child process started by Start; its output goes to a log writer.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts name with args in dir with env added to the environment; stdout and stderr go
// to logs. The process gets its own process group, so Stop also ends its children.
func Start(name string, args []string, dir string, env []string, logs io.Writer) (*Proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs it. It returns
// the process's exit error (nil for a clean exit).
func (p *Proc) Stop(grace time.Duration) error {
	if p.Exited() {
		return p.err
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("killed after %s without exiting on SIGTERM", grace)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return p.err
}

// WaitHTTP polls url with GET until it answers 200, ctx ends, or alive returns false (the
// server died: no point in waiting). It polls every 20 ms.
func WaitHTTP(ctx context.Context, hc *http.Client, url string, alive func() bool) error {
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		if alive != nil && !alive() {
			return fmt.Errorf("%s: the server exited (last: %v)", url, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", url, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
