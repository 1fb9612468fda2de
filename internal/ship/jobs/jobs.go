// Package jobs runs ship's long-running commands: shell or Python programs
// started as shell exec starts them (the sandbox user, a process group of
// their own, a cwd confined to the workspace) but not waited for by the
// request that started them.
//
// Output goes through pipes into two files per job (stdout, stderr) that ship
// owns, in a directory of its own outside the workspace (mode 0700, owned by
// ship's user: user code can neither read nor change them, and a workspace
// clean-up does not touch them). Each file is capped: past the cap the bytes
// are counted and dropped, and the stream says it was truncated, so a job
// printing gigabytes costs neither ship's memory nor the disk. Ship never
// holds output in memory beyond one pipe read.
//
// Each job has a status file, written when it starts and when it ends. A ship
// that starts and finds a job still marked running knows it lost it (ship or
// its container stopped meanwhile): it marks it lost, with the reason, and
// kills what is left of its process group. Its output stays readable.
//
// A job ends when its main process exits: what it left running in its process
// group is killed then, so nothing a job started outlives it unobserved. A
// timeout or a cancel sends SIGTERM to the whole group, then SIGKILL after a
// grace period.
package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/jupyter"
	"github.com/shipyard-dev/shipyard/internal/ship/shell"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// DefaultDir is where ship keeps jobs in a sandbox container: /var/tmp is on
// the container's own filesystem (it survives a restart of ship and of the
// container), sticky and world-writable, so ship's user can create its
// directory there and user code can neither remove nor replace it.
const DefaultDir = "/var/tmp/shipyard-jobs"

// Config configures a Manager.
type Config struct {
	Dir   string        // ship-owned directory of the job directories; created 0700
	Shell *shell.Runner // starts the processes
	// Workspace is scanned for the files a job creates or changes (nil: no artifacts).
	Workspace *workspace.Workspace
	Python    string // interpreter of Python jobs (default python3)
	// Kernel runs the cells of kernel jobs (nil: ship takes none).
	Kernel Kernel
	// MaxOutput caps the bytes kept per stream (default 64 MiB).
	MaxOutput int64
	// MaxTimeout bounds a job's timeout, and is the timeout of a job that gives none
	// (default 24 h).
	MaxTimeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL on a cancel or timeout (default 5 s).
	Grace time.Duration
	// MaxRunning bounds the jobs running at once (default 32).
	MaxRunning int
	// KeepFinished bounds how many ended jobs are kept, with their output (default 100);
	// older ones are removed.
	KeepFinished int
	Log          *slog.Logger
	Now          func() time.Time
}

// Kernel is the sandbox's Python kernel, as kernel jobs use it.
type Kernel interface {
	ExecObserved(ctx context.Context, code string, timeout time.Duration, silent bool, on func(jupyter.Event)) (shipapi.ExecPythonResponse, error)
}

// Manager starts and tracks jobs.
type Manager struct {
	cfg     Config
	startMu sync.Mutex // serialises starts (the id check, the running count)
	mu      sync.Mutex
	jobs    map[string]*job // guarded by mu
	closed  bool            // guarded by mu
}

const (
	statusFile  = "status.json"
	resultFile  = "result.json" // a kernel job's answer, written once it ended
	stdoutFile  = "stdout"
	stderrFile  = "stderr"
	displayFile = "display" // a kernel job's rich outputs, one DisplayEvent per line
)

// streamFiles are the files of a job's streams, by index: stdout, stderr, display.
var streamFiles = [3]string{stdoutFile, stderrFile, displayFile}

// New prepares cfg.Dir (it must be a real directory owned by ship's user, not
// a symbolic link) and loads the jobs found there: jobs still marked running
// are marked lost.
func New(cfg Config) (*Manager, error) {
	if cfg.Shell == nil || cfg.Dir == "" {
		return nil, errors.New("jobs: a shell runner and a directory are required")
	}
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 64 << 20
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 24 * time.Hour
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 32
	}
	if cfg.KeepFinished <= 0 {
		cfg.KeepFinished = 100
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := ownDir(cfg.Dir); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, jobs: map[string]*job{}}
	if err := m.load(); err != nil {
		return nil, err
	}
	return m, nil
}

// ownDir creates dir (mode 0700) if needed and checks it is a directory of
// this process's user, not a link: a directory user code created in its place
// is refused.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("jobs directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("jobs directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("jobs directory %s is not a directory owned by uid %d", dir, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("jobs directory: %w", err)
		}
	}
	return nil
}

// job is one job. Its info is the truth while ship runs; the status file
// holds it across restarts (byte counts excepted: the files' sizes are).
type job struct {
	dir  string
	done chan struct{} // closed once final

	mu        sync.Mutex
	info      shipapi.JobInfo // guarded by mu
	changed   chan struct{}   // guarded by mu; closed (and replaced) on every change
	cancelReq bool            // guarded by mu
	timedOut  bool            // guarded by mu
	stopping  bool            // guarded by mu: ship shuts down
	files     [3]*os.File     // guarded by mu; nil once final
	// interrupt ends a kernel job's cell (nil for other kinds).
	interrupt context.CancelFunc
	result    kernelResult // guarded by mu; a kernel job's answer once it ended
}

// kernelResult is a kernel job's answer (see shipapi.JobOutputResponse), kept in resultFile.
type kernelResult struct {
	Python *shipapi.ExecPythonResponse `json:"python,omitempty"`
	Error  *shipapi.ErrorResponse      `json:"error,omitempty"`
}

// persisted is the status file.
type persisted struct {
	Info shipapi.JobInfo `json:"info"`
	// ProcStart is the start time of the main process (field 22 of /proc/<pid>/stat), so a
	// reused pid is never mistaken for the job's.
	ProcStart string `json:"proc_start,omitempty"`
	PGID      int    `json:"pgid,omitempty"`
}

func (m *Manager) load() error {
	ents, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("jobs directory: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || validID(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(m.cfg.Dir, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, statusFile))
		var p persisted
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.Info.ID != e.Name() {
			m.cfg.Log.Warn("jobs: unreadable job directory removed", "dir", dir, "err", err)
			_ = os.RemoveAll(dir)
			continue
		}
		j := &job{dir: dir, done: make(chan struct{}), changed: make(chan struct{}), info: p.Info}
		close(j.done)
		if b, err := os.ReadFile(filepath.Join(dir, resultFile)); err == nil {
			_ = json.Unmarshal(b, &j.result)
		}
		for i, name := range streamFiles {
			s := j.stream(i)
			if s == nil {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				s.Bytes = fi.Size()
				s.Total = max(s.Total, s.Bytes)
				s.Truncated = s.Truncated || s.Bytes >= m.cfg.MaxOutput
			}
		}
		if j.info.Status == shipapi.JobRunning {
			j.info.Status = shipapi.JobLost
			j.info.Reason = m.lostReason(p)
			if j.info.Kind == shipapi.JobKindKernel {
				j.info.Reason = "ship restarted while the cell ran (ship or its container stopped); the kernel running it went too"
				j.result.Error = &shipapi.ErrorResponse{Code: shipapi.CodeKernelDied, Detail: "Kernel died during execution (ship restarted); its state is lost"}
			}
			now := unixSecs(m.cfg.Now())
			j.info.EndedAt = &now
			if err := j.persist(p.ProcStart, p.PGID); err != nil {
				m.cfg.Log.Warn("jobs: cannot record a lost job", "job_id", j.info.ID, "err", err)
			}
			m.cfg.Log.Warn("jobs: job lost across a restart of ship", "job_id", j.info.ID, "reason", j.info.Reason)
		}
		m.jobs[j.info.ID] = j
	}
	m.prune()
	return nil
}

// lostReason says why a job found running at start is lost, and kills what is
// left of its process group.
func (m *Manager) lostReason(p persisted) string {
	if p.Info.PID > 0 && p.ProcStart != "" && procStart(p.Info.PID) == p.ProcStart {
		_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		return fmt.Sprintf("ship restarted while the job ran and could no longer collect its output; it killed the job's process group (pid %d)", p.Info.PID)
	}
	return fmt.Sprintf("ship restarted while the job ran (ship or its container stopped); the job's process (pid %d) was gone and its exit status unknown", p.Info.PID)
}

// procStart is the start time of a process in clock ticks since boot, or "".
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19] // field 22 overall
}

// stream describes stream i (stdout, stderr, display); nil: the job has no display stream.
func (j *job) stream(i int) *shipapi.Stream {
	switch i {
	case 0:
		return &j.info.Stdout
	case 1:
		return &j.info.Stderr
	}
	return j.info.Display
}

// persist writes the status file (write and rename: never half a file).
func (j *job) persist(procStart string, pgid int) error {
	return j.write(statusFile, persisted{Info: j.info, ProcStart: procStart, PGID: pgid})
}

// write writes v as JSON to the job's file name (write and rename).
func (j *job) write(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(j.dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(j.dir, name))
}

// notify wakes every reader waiting for a change; j.mu must be held.
func (j *job) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
}

func validID(id string) error {
	if id == "" || len(id) > shipapi.MaxJobIDLen {
		return apierr.Newf(shipapi.CodeBadRequest, "job id must have 1 to %d characters", shipapi.MaxJobIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return apierr.New(shipapi.CodeBadRequest, "job id may only hold letters, digits, '-' and '_'")
		}
	}
	return nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

func unixSecs(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// validate checks a start request and returns the shell request that starts
// it, with the program's input (Python's code) and the timeout.
func (m *Manager) validate(req *shipapi.StartJobRequest) (shipapi.ExecShellRequest, io.Reader, time.Duration, error) {
	if req.ID == "" {
		req.ID = newID()
	}
	if err := validID(req.ID); err != nil {
		return shipapi.ExecShellRequest{}, nil, 0, err
	}
	timeout := m.cfg.MaxTimeout
	switch {
	case req.TimeoutSeconds < 0:
		return shipapi.ExecShellRequest{}, nil, 0, apierr.New(shipapi.CodeBadRequest, "timeout must not be negative")
	case req.TimeoutSeconds > m.cfg.MaxTimeout.Seconds():
		return shipapi.ExecShellRequest{}, nil, 0, apierr.Newf(shipapi.CodeBadRequest, "timeout must be at most %g seconds", m.cfg.MaxTimeout.Seconds())
	case req.TimeoutSeconds > 0:
		timeout = time.Duration(req.TimeoutSeconds * float64(time.Second))
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return shipapi.ExecShellRequest{}, nil, 0, apierr.Newf(shipapi.CodeBadRequest, "invalid environment variable %q", k)
		}
	}
	sreq := shipapi.ExecShellRequest{Cwd: req.Cwd, Env: req.Env}
	switch req.Kind {
	case shipapi.JobKindKernel:
		if m.cfg.Kernel == nil {
			return shipapi.ExecShellRequest{}, nil, 0, apierr.New(shipapi.CodeBadRequest, "this ship runs no kernel jobs")
		}
		if strings.TrimSpace(req.Code) == "" || req.Command != "" || req.Cwd != nil || len(req.Env) > 0 || len(req.OutputPaths) > 0 {
			return shipapi.ExecShellRequest{}, nil, 0, apierr.New(shipapi.CodeBadRequest, "a kernel job needs code (and no command, cwd, env or output paths)")
		}
		return sreq, nil, timeout, nil
	case shipapi.JobKindShell:
		if strings.TrimSpace(req.Command) == "" || req.Code != "" {
			return shipapi.ExecShellRequest{}, nil, 0, apierr.New(shipapi.CodeBadRequest, "a shell job needs a command (and no code)")
		}
		sreq.Command = req.Command
		return sreq, nil, timeout, nil
	case shipapi.JobKindPython:
		if strings.TrimSpace(req.Code) == "" || req.Command != "" {
			return shipapi.ExecShellRequest{}, nil, 0, apierr.New(shipapi.CodeBadRequest, "a python job needs code (and no command)")
		}
		// The code comes on standard input (no argument length limit, nothing on disk); -u
		// makes the output arrive as it is printed.
		no := false
		sreq.Shell = &no
		sreq.Command = "'" + strings.ReplaceAll(m.cfg.Python, "'", `'\''`) + "' -u -"
		env := maps.Clone(req.Env)
		if env == nil {
			env = map[string]string{}
		}
		env["PYTHONUNBUFFERED"] = "1"
		sreq.Env = env
		return sreq, strings.NewReader(req.Code), timeout, nil
	}
	return shipapi.ExecShellRequest{}, nil, 0, apierr.Newf(shipapi.CodeBadRequest, "kind must be %q or %q", shipapi.JobKindShell, shipapi.JobKindPython)
}

// Start starts a job, or returns the job ship already has under req.ID.
func (m *Manager) Start(req shipapi.StartJobRequest) (shipapi.JobInfo, error) {
	sreq, stdin, timeout, err := m.validate(&req)
	if err != nil {
		return shipapi.JobInfo{}, err
	}
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	if j := m.jobs[req.ID]; j != nil {
		m.mu.Unlock()
		return j.snapshot(), nil
	}
	running := 0
	for _, j := range m.jobs {
		if j.running() {
			running++
		}
	}
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return shipapi.JobInfo{}, apierr.New(shipapi.CodeInternal, "ship is shutting down")
	}
	if running >= m.cfg.MaxRunning {
		return shipapi.JobInfo{}, apierr.Newf(shipapi.CodeResourcesExhausted, "%d jobs are running already (the limit); wait for one to end or cancel one", running)
	}
	var j *job
	if req.Kind == shipapi.JobKindKernel {
		j, err = m.startCell(req, timeout)
	} else {
		var before *snapshot
		if m.cfg.Workspace != nil {
			paths, err := outputPaths(m.cfg.Workspace, req.OutputPaths)
			if err != nil {
				return shipapi.JobInfo{}, apierr.Wrap(apierr.CodeOf(err), err, "output_paths: "+apierr.MessageOf(err))
			}
			before = scan(m.cfg.Workspace, paths)
		}
		j, err = m.start(req, sreq, stdin, timeout, before)
	}
	if err != nil {
		return shipapi.JobInfo{}, err
	}
	m.mu.Lock()
	m.jobs[req.ID] = j
	m.mu.Unlock()
	m.prune()
	return j.snapshot(), nil
}

// newJob creates the directory of job id and the files of its first n streams.
func (m *Manager) newJob(id string, n int) (*job, error) {
	dir := filepath.Join(m.cfg.Dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot create the job's directory")
	}
	j := &job{dir: dir, done: make(chan struct{}), changed: make(chan struct{})}
	for i, name := range streamFiles[:n] {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			j.closeFiles()
			_ = os.RemoveAll(dir)
			return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot create the job's output files")
		}
		j.files[i] = f
	}
	return j, nil
}

func (m *Manager) start(req shipapi.StartJobRequest, sreq shipapi.ExecShellRequest, stdin io.Reader, timeout time.Duration, before *snapshot) (j *job, err error) {
	j, err = m.newJob(req.ID, 2)
	if err != nil {
		return nil, err
	}
	dir := j.dir
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	sinks := [2]*sink{{j: j, i: 0, max: m.cfg.MaxOutput}, {j: j, i: 1, max: m.cfg.MaxOutput}}
	cmd, notice, err := m.cfg.Shell.Start(sreq, func(c *exec.Cmd) {
		c.Stdin = stdin
		c.Stdout, c.Stderr = sinks[0], sinks[1]
	})
	if err != nil {
		j.closeFiles()
		return nil, err
	}
	pid := cmd.Process.Pid
	j.info = shipapi.JobInfo{
		ID: req.ID, Kind: req.Kind, Status: shipapi.JobRunning, PID: pid,
		StartedAt: unixSecs(m.cfg.Now()), Timeout: timeout.Seconds(), Notice: notice,
	}
	ps := procStart(pid)
	if err := j.persist(ps, pid); err != nil {
		// Without its status file the job could not be accounted for after a restart.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		j.closeFiles()
		return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot write the job's status file")
	}
	m.cfg.Log.Info("job started", "job_id", req.ID, "kind", req.Kind, "pid", pid, "timeout", timeout)
	go m.watch(j, cmd, timeout, ps, before)
	return j, nil
}

// startCell starts a kernel job: its cell waits for the kernel as any python exec does, and
// its timeout is the cell's (an interrupt, then a restart of a kernel that ignores it).
func (m *Manager) startCell(req shipapi.StartJobRequest, timeout time.Duration) (*job, error) {
	j, err := m.newJob(req.ID, 3)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.interrupt = cancel
	j.info = shipapi.JobInfo{ID: req.ID, Kind: req.Kind, Status: shipapi.JobRunning,
		StartedAt: unixSecs(m.cfg.Now()), Timeout: timeout.Seconds(), Display: &shipapi.Stream{}}
	if err := j.persist("", 0); err != nil {
		cancel()
		j.closeFiles()
		_ = os.RemoveAll(j.dir)
		return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot write the job's status file")
	}
	m.cfg.Log.Info("job started", "job_id", req.ID, "kind", req.Kind, "timeout", timeout)
	go m.runCell(ctx, j, req.Code, timeout)
	return j, nil
}

// runCell runs a kernel job's cell, its outputs going to the job's streams as the kernel
// publishes them, and records its end and answer.
func (m *Manager) runCell(ctx context.Context, j *job, code string, timeout time.Duration) {
	sinks := [3]*sink{{j: j, i: 0, max: m.cfg.MaxOutput}, {j: j, i: 1, max: m.cfg.MaxOutput}, {j: j, i: 2, max: m.cfg.MaxOutput}}
	resp, err := m.cfg.Kernel.ExecObserved(ctx, code, timeout, false, func(ev jupyter.Event) {
		switch {
		case ev.Display != nil:
			if b, err := json.Marshal(ev.Display); err == nil {
				_, _ = sinks[2].Write(append(b, '\n'))
			}
		case ev.Stream == "stderr":
			_, _ = sinks[1].Write([]byte(ev.Text))
		default:
			_, _ = sinks[0].Write([]byte(ev.Text))
		}
	})
	j.mu.Lock()
	now := unixSecs(m.cfg.Now())
	j.info.EndedAt = &now
	switch {
	case err != nil && j.cancelReq:
		j.info.Status, j.info.Reason = shipapi.JobCancelled, "cancelled on request: the cell was interrupted"
		j.result.Error = &shipapi.ErrorResponse{Code: shipapi.CodeInternal, Detail: "The execution was cancelled"}
	case err != nil && j.stopping:
		j.info.Status, j.info.Reason = shipapi.JobLost, "ship shut down (the sandbox stopped) while the cell ran"
		j.result.Error = &shipapi.ErrorResponse{Code: shipapi.CodeKernelDied, Detail: "Kernel died during execution (the sandbox stopped); its state is lost"}
	case err != nil:
		j.info.Status, j.info.Reason = shipapi.JobFailed, apierr.MessageOf(err)
		j.result.Error = &shipapi.ErrorResponse{Code: apierr.CodeOf(err), Detail: apierr.MessageOf(err)}
	default:
		j.result.Python = &resp
		switch {
		case resp.TimedOut:
			j.info.Status, j.info.Reason = shipapi.JobTimedOut, fmt.Sprintf("ran past its timeout of %g seconds: the cell was interrupted", timeout.Seconds())
		case resp.Success:
			j.info.Status = shipapi.JobSucceeded
		default:
			j.info.Status = shipapi.JobFailed
		}
	}
	j.closeFiles()
	perr := j.write(resultFile, j.result)
	if perr == nil {
		perr = j.persist("", 0)
	}
	j.notify()
	info := j.info
	j.mu.Unlock()
	close(j.done)
	if perr != nil {
		m.cfg.Log.Error("jobs: cannot record a job's end", "job_id", info.ID, "err", perr)
	}
	m.cfg.Log.Info("job ended", "job_id", info.ID, "status", info.Status)
	m.prune()
}

// stop ends a running job: its cell is interrupted, or its process group terminated.
func (m *Manager) stop(j *job, pid int) {
	if j.interrupt != nil {
		j.interrupt()
		return
	}
	m.terminate(j, pid)
}

func (j *job) closeFiles() {
	for i, f := range j.files {
		if f != nil {
			_ = f.Close()
			j.files[i] = nil
		}
	}
}

func (j *job) running() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.info.Status == shipapi.JobRunning
}

func (j *job) snapshot() shipapi.JobInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.info
}

// watch waits for the job's main process, enforces the timeout, and records
// the end.
func (m *Manager) watch(j *job, cmd *exec.Cmd, timeout time.Duration, ps string, before *snapshot) {
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-waited:
	case <-t.C:
		j.mu.Lock()
		j.timedOut = true
		j.mu.Unlock()
		m.terminate(j, pid)
		<-waited
	}
	// What the job left in its group ends with it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	code := shell.ExitCode(cmd.ProcessState)
	arts, note := artifacts(m.cfg.Workspace, before)
	j.mu.Lock()
	j.info.CreatedArtifacts, j.info.ArtifactsNote = arts, note
	j.info.ExitCode = &code
	now := unixSecs(m.cfg.Now())
	j.info.EndedAt = &now
	switch {
	case j.cancelReq:
		j.info.Status, j.info.Reason = shipapi.JobCancelled, "cancelled on request"
	case j.stopping:
		j.info.Status, j.info.Reason = shipapi.JobLost, "ship shut down (the sandbox stopped) while the job ran; ship terminated its process group"
	case j.timedOut:
		j.info.Status, j.info.Reason = shipapi.JobTimedOut, fmt.Sprintf("ran past its timeout of %g seconds", timeout.Seconds())
	case code == 0:
		j.info.Status = shipapi.JobSucceeded
	default:
		j.info.Status = shipapi.JobFailed
	}
	j.closeFiles()
	err := j.persist(ps, pid)
	j.notify()
	info := j.info
	j.mu.Unlock()
	close(j.done)
	if err != nil {
		m.cfg.Log.Error("jobs: cannot record a job's end", "job_id", info.ID, "err", err)
	}
	m.cfg.Log.Info("job ended", "job_id", info.ID, "status", info.Status, "exit_code", code)
	m.prune()
}

// terminate sends SIGTERM to the job's process group, then SIGKILL after the
// grace period unless the job ended.
func (m *Manager) terminate(j *job, pid int) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	go func() {
		t := time.NewTimer(m.cfg.Grace)
		defer t.Stop()
		select {
		case <-j.done:
		case <-t.C:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
}

// sink writes one stream of a job to its file, up to the cap; it never fails,
// so the job is never blocked or broken by the cap.
type sink struct {
	j   *job
	i   int
	max int64
}

func (s *sink) Write(p []byte) (int, error) {
	j := s.j
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.stream(s.i)
	if st == nil {
		return len(p), nil
	}
	st.Total += int64(len(p))
	keep := min(int64(len(p)), s.max-st.Bytes)
	if keep < int64(len(p)) {
		st.Truncated = true
	}
	if keep > 0 && j.files[s.i] != nil {
		n, err := j.files[s.i].Write(p[:keep])
		st.Bytes += int64(n)
		if err != nil {
			// A full disk: what follows is dropped as past the cap.
			st.Truncated = true
		}
	}
	j.notify()
	return len(p), nil
}

func (m *Manager) lookup(id string) (*job, error) {
	m.mu.Lock()
	j := m.jobs[id]
	m.mu.Unlock()
	if j == nil {
		return nil, apierr.New(shipapi.CodeNotFound, "Job not found: "+id)
	}
	return j, nil
}

// Get describes a job.
func (m *Manager) Get(id string) (shipapi.JobInfo, error) {
	j, err := m.lookup(id)
	if err != nil {
		return shipapi.JobInfo{}, err
	}
	return j.snapshot(), nil
}

// List describes every job kept, oldest first.
func (m *Manager) List() []shipapi.JobInfo {
	m.mu.Lock()
	out := make([]shipapi.JobInfo, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, j.snapshot())
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b shipapi.JobInfo) int {
		return cmp.Or(cmp.Compare(a.StartedAt, b.StartedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

// Cancel terminates a running job's process group (SIGTERM, SIGKILL after
// the grace period) and waits for its end; a job that ended is returned as it
// is.
func (m *Manager) Cancel(ctx context.Context, id string) (shipapi.JobInfo, error) {
	j, err := m.lookup(id)
	if err != nil {
		return shipapi.JobInfo{}, err
	}
	j.mu.Lock()
	run := j.info.Status == shipapi.JobRunning && !j.cancelReq
	if run {
		j.cancelReq = true
	}
	pid := j.info.PID
	j.mu.Unlock()
	if run {
		m.cfg.Log.Info("job cancelled", "job_id", id)
		m.stop(j, pid)
	}
	t := time.NewTimer(m.cfg.Grace + 5*time.Second)
	defer t.Stop()
	select {
	case <-j.done:
	case <-t.C:
		return shipapi.JobInfo{}, apierr.New(shipapi.CodeInternal, "the job did not end after SIGKILL")
	case <-ctx.Done():
		return shipapi.JobInfo{}, apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled")
	}
	return j.snapshot(), nil
}

// Output returns each stream's bytes from its offset (stdout, stderr, display;
// at most maxBytes each). With wait it first waits, at most that long, until a
// stream has bytes past its offset or the job is final. A kernel job's answer
// comes with the read that finds it ended.
func (m *Manager) Output(ctx context.Context, id string, offsets [3]int64, maxBytes int, wait time.Duration) (shipapi.JobOutputResponse, error) {
	j, err := m.lookup(id)
	if err != nil {
		return shipapi.JobOutputResponse{}, err
	}
	if offsets[0] < 0 || offsets[1] < 0 || offsets[2] < 0 {
		return shipapi.JobOutputResponse{}, apierr.New(shipapi.CodeBadRequest, "offsets must not be negative")
	}
	if maxBytes <= 0 || maxBytes > shipapi.MaxJobReadBytes {
		maxBytes = shipapi.MaxJobReadBytes
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		j.mu.Lock()
		info, changed := j.info, j.changed
		j.mu.Unlock()
		ready := info.Status != shipapi.JobRunning || info.Stdout.Bytes > offsets[0] || info.Stderr.Bytes > offsets[1] ||
			info.Display != nil && info.Display.Bytes > offsets[2]
		if ready || deadline == nil {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline:
		case <-ctx.Done():
			return shipapi.JobOutputResponse{}, apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled")
		}
		break
	}
	j.mu.Lock()
	info, result := j.info, j.result
	j.mu.Unlock()
	resp := shipapi.JobOutputResponse{Job: info}
	if info.Status != shipapi.JobRunning {
		resp.Python, resp.Error = result.Python, result.Error
	}
	for i, name := range streamFiles {
		var st shipapi.Stream
		chunk := &resp.Stdout
		switch i {
		case 0:
			st = info.Stdout
		case 1:
			st, chunk = info.Stderr, &resp.Stderr
		default:
			if info.Display == nil {
				continue
			}
			st, resp.Display = *info.Display, &shipapi.StreamChunk{}
			chunk = resp.Display
		}
		final := info.Status != shipapi.JobRunning || st.Truncated
		c, err := readChunk(filepath.Join(j.dir, name), offsets[i], st.Bytes, maxBytes, final)
		if err != nil {
			return shipapi.JobOutputResponse{}, err
		}
		*chunk = c
	}
	return resp, nil
}

// readChunk reads bytes [off, min(size, off+max)) of a stream's file. While
// more may come (not final) it stops before an incomplete UTF-8 sequence at
// the end, which the next read returns whole.
func readChunk(path string, off, size int64, max int, final bool) (shipapi.StreamChunk, error) {
	off = min(off, size)
	n := min(size-off, int64(max))
	c := shipapi.StreamChunk{Offset: off, Next: off}
	if n == 0 {
		return c, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return c, apierr.Wrap(shipapi.CodeInternal, err, "cannot read the job's output")
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return c, apierr.Wrap(shipapi.CodeInternal, err, "cannot read the job's output")
	}
	b = b[:k]
	if !final || off+int64(k) < size {
		b = b[:completeUTF8(b)]
	}
	c.Next = off + int64(len(b))
	c.Data = string(b)
	return c, nil
}

// completeUTF8 is len(b) less a trailing incomplete (but so far valid) UTF-8
// sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue // a continuation byte
		}
		need := 0
		switch c := b[i]; {
		case c >= 0xF8: // never valid
		case c >= 0xF0:
			need = 4
		case c >= 0xE0:
			need = 3
		case c >= 0xC0:
			need = 2
		}
		if need > len(b)-i {
			return i
		}
		break
	}
	return len(b)
}

// prune removes the oldest ended jobs beyond KeepFinished.
func (m *Manager) prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ended []*job
	for _, j := range m.jobs {
		if !j.running() {
			ended = append(ended, j)
		}
	}
	if len(ended) <= m.cfg.KeepFinished {
		return
	}
	slices.SortFunc(ended, func(a, b *job) int { return cmp.Compare(a.snapshot().StartedAt, b.snapshot().StartedAt) })
	for _, j := range ended[:len(ended)-m.cfg.KeepFinished] {
		delete(m.jobs, j.snapshot().ID)
		_ = os.RemoveAll(j.dir)
	}
}

// Close terminates every running job (they are recorded lost: ship is going
// away) and waits, at most the grace period and a little, for their ends.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.closed = true
	var run []*job
	for _, j := range m.jobs {
		if j.running() {
			run = append(run, j)
		}
	}
	m.mu.Unlock()
	for _, j := range run {
		j.mu.Lock()
		j.stopping = true
		pid := j.info.PID
		j.mu.Unlock()
		m.stop(j, pid)
	}
	t := time.NewTimer(m.cfg.Grace + 2*time.Second)
	defer t.Stop()
	for _, j := range run {
		select {
		case <-j.done:
		case <-t.C:
			return
		}
	}
}
