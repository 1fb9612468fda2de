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

// Manager starts and tracks jobs.
type Manager struct {
	cfg     Config
	startMu sync.Mutex // serialises starts (the id check, the running count)
	mu      sync.Mutex
	jobs    map[string]*job // guarded by mu
	closed  bool            // guarded by mu
}

const (
	statusFile = "status.json"
	stdoutFile = "stdout"
	stderrFile = "stderr"
)

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
	files     [2]*os.File     // guarded by mu; nil once final
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
		for i, name := range []string{stdoutFile, stderrFile} {
			s := j.stream(i)
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				s.Bytes = fi.Size()
				s.Total = max(s.Total, s.Bytes)
				s.Truncated = s.Truncated || s.Bytes >= m.cfg.MaxOutput
			}
		}
		if j.info.Status == shipapi.JobRunning {
			j.info.Status = shipapi.JobLost
			j.info.Reason = m.lostReason(p)
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

func (j *job) stream(i int) *shipapi.Stream {
	if i == 0 {
		return &j.info.Stdout
	}
	return &j.info.Stderr
}

// persist writes the status file (write and rename: never half a file).
func (j *job) persist(procStart string, pgid int) error {
	b, err := json.Marshal(persisted{Info: j.info, ProcStart: procStart, PGID: pgid})
	if err != nil {
		return err
	}
	tmp := filepath.Join(j.dir, statusFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(j.dir, statusFile))
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
	var before *snapshot
	if m.cfg.Workspace != nil {
		paths, err := outputPaths(m.cfg.Workspace, req.OutputPaths)
		if err != nil {
			return shipapi.JobInfo{}, apierr.Wrap(apierr.CodeOf(err), err, "output_paths: "+apierr.MessageOf(err))
		}
		before = scan(m.cfg.Workspace, paths)
	}
	j, err := m.start(req, sreq, stdin, timeout, before)
	if err != nil {
		return shipapi.JobInfo{}, err
	}
	m.mu.Lock()
	m.jobs[req.ID] = j
	m.mu.Unlock()
	m.prune()
	return j.snapshot(), nil
}

func (m *Manager) start(req shipapi.StartJobRequest, sreq shipapi.ExecShellRequest, stdin io.Reader, timeout time.Duration, before *snapshot) (j *job, err error) {
	dir := filepath.Join(m.cfg.Dir, req.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot create the job's directory")
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	j = &job{dir: dir, done: make(chan struct{}), changed: make(chan struct{})}
	for i, name := range []string{stdoutFile, stderrFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			j.closeFiles()
			return nil, apierr.Wrap(shipapi.CodeInternal, err, "cannot create the job's output files")
		}
		j.files[i] = f
	}
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
		m.terminate(j, pid)
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

// Output returns each stream's bytes from its offset (at most maxBytes each).
// With wait it first waits, at most that long, until either stream has bytes
// past its offset or the job is final.
func (m *Manager) Output(ctx context.Context, id string, offsets [2]int64, maxBytes int, wait time.Duration) (shipapi.JobOutputResponse, error) {
	j, err := m.lookup(id)
	if err != nil {
		return shipapi.JobOutputResponse{}, err
	}
	if offsets[0] < 0 || offsets[1] < 0 {
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
		ready := info.Status != shipapi.JobRunning || info.Stdout.Bytes > offsets[0] || info.Stderr.Bytes > offsets[1]
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
	info := j.snapshot()
	resp := shipapi.JobOutputResponse{Job: info}
	for i, name := range []string{stdoutFile, stderrFile} {
		st, chunk := info.Stdout, &resp.Stdout
		if i == 1 {
			st, chunk = info.Stderr, &resp.Stderr
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
		m.terminate(j, pid)
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
