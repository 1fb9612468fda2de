package shell

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// Background process statuses.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed" // exit code 0
	StatusFailed    = "failed"    // non-zero exit or killed by a signal
	StatusKilled    = "killed"    // killed through the API
)

// Process is a background command. Its goroutine waits for it, so finished
// processes are always reaped.
type Process struct {
	id      string
	command string
	pid     int
	started time.Time
	stdout  *capBuffer
	stderr  *capBuffer
	done    chan struct{} // closed once reaped

	mu       sync.Mutex
	status   string    // guarded by mu
	code     *int      // guarded by mu
	finished time.Time // guarded by mu
	killReq  bool      // guarded by mu
}

type registry struct {
	mu    sync.Mutex
	procs map[string]*Process // guarded by mu
}

func newProcID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Runner) startBackground(req shipapi.ExecShellRequest) (shipapi.ExecShellResponse, error) {
	p := &Process{
		command: req.Command,
		stdout:  &capBuffer{max: r.cfg.MaxStdout},
		stderr:  &capBuffer{max: r.cfg.MaxStderr},
		done:    make(chan struct{}),
		status:  StatusRunning,
	}
	cmd, notice, fail, err := r.start(req, func(c *exec.Cmd) { c.Stdout, c.Stderr = p.stdout, p.stderr })
	if err != nil {
		return shipapi.ExecShellResponse{}, err
	}
	if fail != nil {
		return *fail, nil
	}
	p.pid = cmd.Process.Pid
	p.started = time.Now()
	r.reg.mu.Lock()
	for {
		p.id = newProcID()
		if _, dup := r.reg.procs[p.id]; !dup {
			break
		}
	}
	r.reg.procs[p.id] = p
	r.reg.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		code := ExitCode(cmd.ProcessState)
		p.mu.Lock()
		p.code = &code
		p.finished = time.Now()
		switch {
		case p.killReq:
			p.status = StatusKilled
		case code == 0:
			p.status = StatusCompleted
		default:
			p.status = StatusFailed
		}
		p.mu.Unlock()
		close(p.done)
		r.cfg.Log.Debug("background process finished", "process_id", p.id, "pid", p.pid, "code", code)
		r.prune()
	}()
	pid, id := p.pid, p.id
	return shipapi.ExecShellResponse{Success: true, ReturnCode: 0, PID: &pid, ProcessID: &id, Notice: notice}, nil
}

// prune forgets finished processes older than KeepFinishedFor and all but
// the KeepFinished most recent finished ones.
func (r *Runner) prune() {
	r.reg.mu.Lock()
	defer r.reg.mu.Unlock()
	type fin struct {
		id string
		at time.Time
	}
	var done []fin
	cutoff := time.Now().Add(-r.cfg.KeepFinishedFor)
	for id, p := range r.reg.procs {
		p.mu.Lock()
		f, running := p.finished, p.status == StatusRunning
		p.mu.Unlock()
		if running {
			continue
		}
		if f.Before(cutoff) {
			delete(r.reg.procs, id)
			continue
		}
		done = append(done, fin{id, f})
	}
	if len(done) > r.cfg.KeepFinished {
		slices.SortFunc(done, func(a, b fin) int { return a.at.Compare(b.at) })
		for _, f := range done[:len(done)-r.cfg.KeepFinished] {
			delete(r.reg.procs, f.id)
		}
	}
}

func (p *Process) info(withOutput bool) shipapi.ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	pi := shipapi.ProcessInfo{
		ProcessID: p.id,
		PID:       p.pid,
		Command:   p.command,
		Status:    p.status,
		StartedAt: float64(p.started.UnixNano()) / 1e9,
	}
	if p.code != nil {
		c := *p.code
		pi.ReturnCode = &c
		f := float64(p.finished.UnixNano()) / 1e9
		pi.FinishedAt = &f
	}
	if withOutput {
		pi.Stdout, pi.Stderr = p.stdout.String(), p.stderr.String()
		pi.StdoutTruncated, pi.StderrTruncated = p.stdout.Truncated(), p.stderr.Truncated()
	}
	return pi
}

// Processes lists background processes (without their output), oldest first.
func (r *Runner) Processes() []shipapi.ProcessInfo {
	r.prune()
	r.reg.mu.Lock()
	ps := make([]*Process, 0, len(r.reg.procs))
	for _, p := range r.reg.procs {
		ps = append(ps, p)
	}
	r.reg.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Process) int { return a.started.Compare(b.started) })
	out := make([]shipapi.ProcessInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.info(false))
	}
	return out
}

func (r *Runner) lookup(id string) (*Process, error) {
	r.reg.mu.Lock()
	p := r.reg.procs[id]
	r.reg.mu.Unlock()
	if p == nil {
		return nil, apierr.New(shipapi.CodeNotFound, "Process not found: "+id)
	}
	return p, nil
}

// Process describes one background process, with its output so far.
func (r *Runner) Process(id string) (shipapi.ProcessInfo, error) {
	p, err := r.lookup(id)
	if err != nil {
		return shipapi.ProcessInfo{}, err
	}
	return p.info(true), nil
}

// Kill kills the process group of a background process and waits (briefly)
// until it has been reaped.
func (r *Runner) Kill(id string) (shipapi.ProcessInfo, error) {
	p, err := r.lookup(id)
	if err != nil {
		return shipapi.ProcessInfo{}, err
	}
	if p.kill() {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			return shipapi.ProcessInfo{}, apierr.Wrap(shipapi.CodeInternal, errors.New("not reaped after SIGKILL"), "process did not exit after being killed")
		}
	}
	return p.info(true), nil
}

// kill marks a running process as killed on request and kills its process group. It reports
// whether the process was running.
func (p *Process) kill() bool {
	p.mu.Lock()
	running := p.status == StatusRunning
	if running {
		p.killReq = true
	}
	p.mu.Unlock()
	if running {
		killGroup(p.pid)
	}
	return running
}

// Close kills every running background process group and waits for them.
func (r *Runner) Close() {
	r.reg.mu.Lock()
	var ps []*Process
	for _, p := range r.reg.procs {
		ps = append(ps, p)
	}
	r.reg.mu.Unlock()
	for _, p := range ps {
		p.kill()
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
}
