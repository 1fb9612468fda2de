package jupyter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// Kernel states reported by Manager.Status.
const (
	StateNotStarted = "not_started"
	StateStarting   = "starting"
	StateAlive      = "alive"
	StateDead       = "dead"
	StateRestarting = "restarting"
)

// ManagerConfig configures the singleton kernel of a ship.
type ManagerConfig struct {
	Kernel KernelConfig
	// StartTimeout bounds one kernel start (process, connect, init code).
	StartTimeout time.Duration
	// InterruptGrace is how long a timed-out cell may take to stop after the
	// interrupt before the kernel is restarted.
	InterruptGrace time.Duration
	// OnExhausted, when set, is called when the kernel cannot start because
	// the sandbox ran out of processes (its pids limit); it should free them
	// and return a notice saying what it did. The start is then tried once
	// more.
	OnExhausted func() string
	// AtPidsLimit reports whether the sandbox is at its pids limit; default
	// the cgroup's counters (atPidsLimit). While a kernel starts it is
	// sampled: a start that stays at the limit for PidsStall is given up as
	// exhaustion instead of waiting out StartTimeout.
	AtPidsLimit func() bool
	// PidsStall is how long a start may stay at the pids limit; default 2 s.
	PidsStall time.Duration
	// MaxText and MaxImageBytes bound the output kept per execution (text
	// bytes, base64 image bytes in all); defaults 1 MiB and 16 MiB.
	MaxText       int
	MaxImageBytes int
	Log           *slog.Logger
}

// Manager owns the one kernel of a ship: it starts it (in the background),
// serialises executions, restarts it when it dies and reports its state.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger
	sem chan struct{} // capacity 1: one execution at a time
	// stopping counts retired kernels still being shut down, so Close can
	// wait for them: a kernel outliving ship would be orphaned.
	stopping sync.WaitGroup

	mu       sync.Mutex
	cur      *slot // guarded by mu; nil before the first start
	restarts int   // guarded by mu
	closed   bool  // guarded by mu
	// lost says why the kernel was restarted without being asked to (it died,
	// or a cell ignored the interrupt); the next response reports it, then it
	// is cleared. Guarded by mu.
	lost string
	// watcherLate, when set (tests), runs in a kernel's watcher after the process exited and
	// before the watcher reacts: the scheduler may run it that late.
	watcherLate func()
}

// noticeLost records why the kernel state was lost; the first reason stands.
// Callers hold m.mu.
func (m *Manager) noticeLostLocked(why string) {
	if m.lost == "" {
		m.lost = why
	}
}

// takeLost returns and clears the pending notice of a lost kernel state.
func (m *Manager) takeLost() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	why := m.lost
	m.lost = ""
	return why
}

// slot is one start attempt and, once ready, its kernel.
type slot struct {
	ready   chan struct{}      // closed when the start attempt finished
	cancel  context.CancelFunc // aborts the start (the process is killed)
	k       *Kernel            // set before ready is closed, nil on failure
	err     error              // start error, set before ready is closed
	restart bool               // this start replaces a previous kernel
	dead    bool               // guarded by Manager.mu
	retired bool               // replaced or shut down on purpose; guarded by Manager.mu
}

// NewManager returns a manager; no kernel is started until Start or Exec.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.InterruptGrace == 0 {
		cfg.InterruptGrace = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Kernel.Log == nil {
		cfg.Kernel.Log = cfg.Log
	}
	if cfg.AtPidsLimit == nil {
		cfg.AtPidsLimit = atPidsLimit
	}
	if cfg.PidsStall <= 0 {
		cfg.PidsStall = 2 * time.Second
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = 1 << 20
	}
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = 16 << 20
	}
	return &Manager{cfg: cfg, log: cfg.Log, sem: make(chan struct{}, 1)}
}

// Start begins starting the kernel in the background if none is running or
// starting.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil && !m.closed {
		m.startLocked(false)
	}
}

func (m *Manager) startLocked(restart bool) *slot {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StartTimeout)
	s := &slot{ready: make(chan struct{}), restart: restart, cancel: cancel}
	m.cur = s
	go m.run(ctx, s)
	return s
}

// run starts the kernel of s and then watches its process.
func (m *Manager) run(ctx context.Context, s *slot) {
	t0 := time.Now()
	k, err := StartKernel(ctx, m.cfg.Kernel)
	s.cancel()
	s.k, s.err = k, err
	close(s.ready)
	if err != nil {
		m.log.Error("kernel start failed", "err", err)
		return
	}
	m.log.Info("kernel ready", "pid", k.PID(), "took", time.Since(t0).Round(time.Millisecond))
	m.mu.Lock()
	if m.closed || s.retired {
		m.mu.Unlock()
		k.Kill()
		return
	}
	m.mu.Unlock()

	<-k.Exited()
	if m.watcherLate != nil {
		m.watcherLate()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaceDeadLocked(s)
}

// replaceDeadLocked starts a kernel in place of s, whose process has exited, unless s was
// retired on purpose or already replaced. Both s's watcher and the next call that finds the
// process gone come here, whichever is first: the call cannot wait for the watcher, which may
// not have run yet when a call that saw the death has answered and the next one arrives.
// Callers hold m.mu.
func (m *Manager) replaceDeadLocked(s *slot) {
	s.dead = true
	if s.retired || m.closed || m.cur != s {
		return
	}
	s.retired = true
	m.log.Warn("kernel died, restarting it", "pid", s.k.PID(), "exit", s.k.ExitErr())
	s.k.Kill() // release sockets and files; the process is already gone
	m.noticeLostLocked(fmt.Sprintf("The Python kernel died (%v) and was restarted: its state (variables, imports, definitions) is lost.", s.k.ExitErr()))
	m.restarts++
	m.startLocked(true)
}

// exited reports whether s finished starting and its kernel process is gone.
func (s *slot) exited() bool {
	select {
	case <-s.ready:
	default:
		return false
	}
	if s.k == nil {
		return false
	}
	select {
	case <-s.k.Exited():
		return true
	default:
		return false
	}
}

// Status reports the kernel state.
func (m *Manager) Status() shipapi.KernelStatusResponse {
	m.mu.Lock()
	s, restarts := m.cur, m.restarts
	m.mu.Unlock()
	r := shipapi.KernelStatusResponse{Status: StateNotStarted, Workspace: m.cfg.Kernel.Dir, Restarts: restarts}
	if s == nil {
		return r
	}
	select {
	case <-s.ready:
	default:
		r.Status = StateStarting
		if s.restart {
			r.Status = StateRestarting
		}
		return r
	}
	if s.err != nil {
		r.Status = StateDead
		return r
	}
	m.mu.Lock()
	dead := s.dead
	m.mu.Unlock()
	r.HasKernel = !dead
	r.PID = s.k.PID()
	r.Status = StateAlive
	if dead {
		r.Status = StateDead
	}
	return r
}

// kernel returns the current kernel, starting one if needed and waiting
// (bounded by ctx and StartTimeout) while it starts.
func (m *Manager) kernel(ctx context.Context) (*slot, error) {
	for attempt := 0; ; attempt++ {
		s, err := m.kernelOnce(ctx)
		// A restart ship made on its own (the kernel had died) may have failed
		// for a passing reason, e.g. it was killed with every other process of
		// the sandbox user: the caller asked for nothing, so try once more.
		if err == nil || attempt > 0 || s == nil || !s.restart || apierr.CodeOf(err) == shipapi.CodeResourcesExhausted {
			return s, err
		}
		m.log.Warn("kernel restart failed, starting it again", "err", err)
	}
}

// kernelOnce is one attempt of kernel. On a failed start it also returns the
// failed slot.
func (m *Manager) kernelOnce(ctx context.Context) (*slot, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, apierr.New(shipapi.CodeKernelStartup, "ship is shutting down")
	}
	s := m.cur
	if s != nil && s.exited() {
		m.replaceDeadLocked(s)
		s = m.cur
	}
	if s == nil {
		s = m.startLocked(false)
	}
	m.mu.Unlock()
	if err := m.awaitStart(ctx, s); err != nil {
		if apierr.CodeOf(err) == shipapi.CodeResourcesExhausted {
			return s, err
		}
		return nil, err
	}
	if s.err != nil {
		// Forget the failed attempt so the next call tries again.
		m.mu.Lock()
		if m.cur == s {
			m.cur = nil
		}
		m.mu.Unlock()
		if exhausted(s.err) || atPidsLimit() {
			return s, apierr.Wrap(shipapi.CodeResourcesExhausted, s.err,
				"Kernel failed to start: the sandbox has no process left (pids limit reached)")
		}
		return s, apierr.Wrap(shipapi.CodeInternal, s.err, "Kernel failed to start: "+s.err.Error())
	}
	return s, nil
}

// awaitStart waits until the start attempt s has finished. A start during
// which the sandbox stays at its pids limit is given up at once: the
// interpreter got its process but cannot create the threads it needs and
// would hang until StartTimeout, while whatever holds the slots (a fork bomb)
// goes on. The attempt is then abandoned (its process killed) and reported as
// exhaustion, so the caller can free the processes and start again.
func (m *Manager) awaitStart(ctx context.Context, s *slot) error {
	t := time.NewTimer(m.cfg.StartTimeout + time.Second)
	defer t.Stop()
	const every = 250 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	var atLimit time.Duration
	for {
		select {
		case <-s.ready:
			return nil
		case <-ctx.Done():
			return apierr.Wrap(shipapi.CodeKernelStartup, ctx.Err(), "Kernel is still starting")
		case <-t.C:
			return apierr.New(shipapi.CodeKernelStartup, "Kernel did not become ready in time")
		case <-tick.C:
			if !m.cfg.AtPidsLimit() {
				atLimit = 0
				continue
			}
			if atLimit += every; atLimit < m.cfg.PidsStall {
				continue
			}
			m.mu.Lock()
			if m.cur == s {
				m.cur = nil
			}
			s.retired = true
			m.mu.Unlock()
			s.cancel()
			m.log.Warn("kernel start abandoned: the sandbox is at its pids limit", "for", atLimit)
			return apierr.New(shipapi.CodeResourcesExhausted,
				"Kernel failed to start: the sandbox has no process left (pids limit reached)")
		}
	}
}

// exhausted reports whether a kernel start failed for lack of processes or
// threads (the sandbox's pids limit): fork failing with EAGAIN, or Python
// failing to create its threads.
func exhausted(err error) bool {
	if errors.Is(err, syscall.EAGAIN) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "can't start new thread") || strings.Contains(msg, "Resource temporarily unavailable") ||
		strings.Contains(msg, "resource temporarily unavailable")
}

// pidsFiles are the sandbox's process counter and limit, under cgroup v2 and v1.
var pidsFiles = [][2]string{
	{"/sys/fs/cgroup/pids.current", "/sys/fs/cgroup/pids.max"},
	{"/sys/fs/cgroup/pids/pids.current", "/sys/fs/cgroup/pids/pids.max"},
}

// atPidsLimit reports whether the sandbox's processes (threads included) are within a few of
// its pids limit. A kernel start can fail without any EAGAIN reaching ship: the interpreter
// starts, then cannot create the threads it needs and never answers; at the limit that failure
// is exhaustion too.
func atPidsLimit() bool {
	for _, f := range pidsFiles {
		cur, err1 := os.ReadFile(f[0])
		max, err2 := os.ReadFile(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		c, err1 := strconv.Atoi(strings.TrimSpace(string(cur)))
		m, err2 := strconv.Atoi(strings.TrimSpace(string(max))) // "max" (no limit) fails here
		return err1 == nil && err2 == nil && c >= m-8
	}
	return false
}

// kernelHealing is kernel, except that a start that failed because the
// sandbox ran out of processes is retried once after OnExhausted freed them;
// notice then says what was done.
func (m *Manager) kernelHealing(ctx context.Context) (s *slot, notice string, err error) {
	s, err = m.kernel(ctx)
	if err == nil || m.cfg.OnExhausted == nil || apierr.CodeOf(err) != shipapi.CodeResourcesExhausted {
		return s, "", err
	}
	notice = m.cfg.OnExhausted()
	s, err = m.kernel(ctx)
	if err != nil && apierr.CodeOf(err) == shipapi.CodeResourcesExhausted {
		err = apierr.Wrap(shipapi.CodeResourcesExhausted, err, apierr.MessageOf(err)+". "+notice)
	}
	return s, notice, err
}

// Exec runs code in the kernel. Calls are serialised. A timeout interrupts
// the cell (the kernel keeps its state) and is reported in the response, not
// as an error. If the kernel dies during the call, the error has code
// kernel_died and a new kernel is already starting.
func (m *Manager) Exec(ctx context.Context, code string, timeout time.Duration, silent bool) (shipapi.ExecPythonResponse, error) {
	return m.ExecObserved(ctx, code, timeout, silent, nil)
}

// ExecObserved is Exec, with on (when not nil) told every output of the cell as the kernel
// publishes it.
func (m *Manager) ExecObserved(ctx context.Context, code string, timeout time.Duration, silent bool, on func(Event)) (shipapi.ExecPythonResponse, error) {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return shipapi.ExecPythonResponse{}, apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled while waiting for the kernel")
	}
	defer func() { <-m.sem }()

	s, notice, err := m.kernelHealing(ctx)
	if err != nil {
		return shipapi.ExecPythonResponse{}, err
	}
	// A restart before this call is reported now; one this call causes
	// (timeout) is reported in its answer and again in the next.
	lost := m.takeLost()
	resp, err := m.exec(ctx, s, code, timeout, silent, on)
	if err != nil {
		return resp, err
	}
	resp.Notice = notice
	if lost != "" && !resp.KernelRestarted {
		resp.KernelRestarted, resp.KernelNotice = true, lost
	}
	return resp, nil
}

func (m *Manager) exec(ctx context.Context, s *slot, code string, timeout time.Duration, silent bool, on func(Event)) (shipapi.ExecPythonResponse, error) {
	k := s.k
	ex, err := k.Client.Execute(code, silent)
	if err != nil {
		return shipapi.ExecPythonResponse{}, m.deadOr(s, err)
	}
	defer ex.Close()
	ex.Limit(m.cfg.MaxText, m.cfg.MaxImageBytes)
	ex.Observe(on)

	tctx, cancel := context.WithTimeout(ctx, timeout)
	err = ex.Wait(tctx, k.Exited())
	cancel()
	timedOut := false
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		timedOut = true
		m.log.Info("cell timed out, interrupting kernel", "timeout", timeout)
		if ierr := k.Interrupt(); ierr != nil {
			m.log.Warn("interrupt failed", "err", ierr)
		}
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.InterruptGrace)
		err = ex.Wait(gctx, k.Exited())
		gcancel()
		if err != nil && !errors.Is(err, errAborted) {
			// The cell ignored the interrupt: only a restart frees the kernel.
			m.log.Warn("cell did not stop after interrupt, restarting kernel", "err", err)
			why := fmt.Sprintf("A cell timed out after %s seconds and did not stop when interrupted, so the Python kernel was restarted: its state (variables, imports, definitions) is lost.", secs(timeout))
			m.restartLost(s, why)
			msg := fmt.Sprintf("Code execution timed out after %s seconds and did not stop when interrupted; the kernel was restarted (state lost)", secs(timeout))
			r := ex.Result()
			return shipapi.ExecPythonResponse{Success: false, Error: &msg, TimedOut: true, Output: output(r), Stdout: r.Stdout, Stderr: r.Stderr,
				TextTruncated: r.TextTruncated, ImagesTruncated: r.ImagesTruncated,
				KernelRestarted: true, KernelNotice: why}, nil
		}
	default:
		if errors.Is(err, context.Canceled) {
			// The client went away: stop the cell so the next call is not blocked.
			_ = k.Interrupt()
			return shipapi.ExecPythonResponse{}, apierr.Wrap(shipapi.CodeInternal, err, "request cancelled")
		}
	}
	if err != nil {
		return shipapi.ExecPythonResponse{}, m.deadOr(s, err)
	}
	r := ex.Result()
	resp := shipapi.ExecPythonResponse{
		Success:         r.Status == "ok" && r.Error == "" && !timedOut,
		ExecutionCount:  r.ExecutionCount,
		Output:          output(r),
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		TextTruncated:   r.TextTruncated,
		ImagesTruncated: r.ImagesTruncated,
	}
	if timedOut {
		msg := fmt.Sprintf("Code execution timed out after %s seconds", secs(timeout))
		resp.Error, resp.TimedOut = &msg, true
	} else if r.Error != "" {
		resp.Error = &r.Error
	} else if r.Status != "ok" {
		msg := "Execution " + r.Status
		resp.Error = &msg
	}
	return resp, nil
}

// restartLost replaces the kernel of s, which must go (a cell ignores
// interrupts), with a new one at once, so the next call waits for the new
// kernel instead of meeting the dead one; why is reported to the next call.
func (m *Manager) restartLost(s *slot, why string) {
	m.mu.Lock()
	s.retired = true // its watcher must not start another one
	m.mu.Unlock()
	s.k.Kill()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.cur != s {
		return
	}
	m.noticeLostLocked(why)
	m.restarts++
	m.startLocked(true)
}

func secs(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d", int(d/time.Second))
	}
	return fmt.Sprintf("%g", d.Seconds())
}

func output(r Result) shipapi.PythonOutput {
	o := shipapi.PythonOutput{Text: r.Text, Images: make([]map[string]string, 0, len(r.Images))}
	for _, img := range r.Images {
		o.Images = append(o.Images, map[string]string{"image/png": img})
	}
	return o
}

// deadOr turns err into kernel_died when the kernel process is gone.
func (m *Manager) deadOr(s *slot, err error) error {
	select {
	case <-s.k.Exited():
		return apierr.Wrap(shipapi.CodeKernelDied, err,
			fmt.Sprintf("Kernel died during execution (%v); it has been restarted and its state is lost", s.k.ExitErr()))
	case <-time.After(200 * time.Millisecond):
		// A closed client usually means the process is exiting: give it a moment.
		select {
		case <-s.k.Exited():
			return m.deadOr(s, err)
		default:
		}
		return apierr.Wrap(shipapi.CodeInternal, err, "Execution error: "+err.Error())
	}
}

// Restart replaces the kernel with a fresh one and waits until it is ready.
func (m *Manager) Restart(ctx context.Context) error {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled while waiting for the kernel")
	}
	defer func() { <-m.sem }()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return apierr.New(shipapi.CodeKernelStartup, "ship is shutting down")
	}
	old := m.cur
	if old != nil {
		old.retired = true
	}
	m.restarts++
	s := m.startLocked(old != nil)
	m.mu.Unlock()
	if old != nil {
		m.stopping.Add(1)
		go func() {
			defer m.stopping.Done()
			m.stopSlot(old)
		}()
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return apierr.Wrap(shipapi.CodeKernelStartup, ctx.Err(), "Kernel is still starting")
	}
	if s.err != nil {
		return apierr.Wrap(shipapi.CodeInternal, s.err, "Kernel failed to start: "+s.err.Error())
	}
	return nil
}

// stopGrace is how long a kernel asked to shut down may take before it is killed.
const stopGrace = 2 * time.Second

func (m *Manager) stopSlot(s *slot) {
	<-s.ready
	if s.k != nil {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		s.k.Shutdown(ctx)
		cancel()
	}
}

// KernelPID is the pid of the live kernel, or 0.
func (m *Manager) KernelPID() int {
	st := m.Status()
	if st.Status != StateAlive {
		return 0
	}
	return st.PID
}

// Close shuts the kernel down (gracefully while ctx and a 2 s grace last, then by
// SIGKILL) and stops restarting it. When it returns no kernel process of this
// manager is left running.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	s := m.cur
	if s != nil {
		s.retired = true
	}
	m.mu.Unlock()
	if s != nil {
		select {
		case <-s.ready:
		default:
			s.cancel() // a start in progress kills its process and fails
			<-s.ready
		}
		if s.k != nil {
			// A kernel that ignores the shutdown request (stuck, or busy at the pids limit) is
			// killed after the same grace as a retired one, whatever ctx allows.
			sctx, cancel := context.WithTimeout(ctx, stopGrace)
			s.k.Shutdown(sctx)
			cancel()
		}
	}
	m.stopping.Wait() // bounded: each stop gives up after stopGrace and kills
}
