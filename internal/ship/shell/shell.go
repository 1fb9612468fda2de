// Package shell runs commands for the ship runtime: `bash -lc <command>` as the
// user ship runs as, in a directory confined to the workspace, with stdin from
// /dev/null, stdout and stderr captured separately up to a byte cap each.
//
// Every command runs in its own process group. A timeout (or the caller going
// away) kills the whole group, grandchildren included, so a reply is never
// held up by a descendant keeping the pipes open. When the command itself
// exits but leaves background descendants holding the pipes, the reply waits
// at most PipeGrace for them and then returns; those descendants keep running
// (as `cmd &` would in a terminal) — use background mode to manage them.
//
// stdout/stderr are returned raw (not trimmed); Bay trims them.
package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// Config configures a Runner.
type Config struct {
	Workspace      *workspace.Workspace
	MaxStdout      int           // bytes kept of stdout per command
	MaxStderr      int           // bytes kept of stderr per command
	DefaultTimeout time.Duration // when the request has none
	MaxTimeout     time.Duration // upper bound for a request's timeout (0: none)
	PipeGrace      time.Duration // see package doc
	// Env is the base environment (ship's own); HOME, PWD, SHELL, USER,
	// LOGNAME and LANG are set on top of it, then the request's env.
	Env []string
	Log *slog.Logger
	// User is the sandbox user commands run as (nil: ship's own user). With
	// it, a command that cannot start because the sandbox's pids limit is
	// exhausted makes ship kill every process of that user and try once more.
	User *privsep.User
	// Keep* bound how many finished background processes are remembered.
	KeepFinished    int
	KeepFinishedFor time.Duration
}

// Runner executes shell commands and tracks background processes.
type Runner struct {
	cfg  Config
	user string
	reg  registry
}

// New returns a Runner.
func New(cfg Config) *Runner {
	if cfg.MaxStdout <= 0 {
		cfg.MaxStdout = 1 << 20
	}
	if cfg.MaxStderr <= 0 {
		cfg.MaxStderr = 1 << 20
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if cfg.PipeGrace <= 0 {
		cfg.PipeGrace = time.Second
	}
	if cfg.KeepFinished <= 0 {
		cfg.KeepFinished = 100
	}
	if cfg.KeepFinishedFor <= 0 {
		cfg.KeepFinishedFor = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	name := os.Getenv("USER")
	if cfg.User != nil {
		name = cfg.User.Name
	} else if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return &Runner{cfg: cfg, user: name, reg: registry{procs: map[string]*Process{}}}
}

// prepare validates the request and builds the command. A cwd that is not a
// directory inside the workspace is an error with the code a path of the file
// API would get.
func (r *Runner) prepare(req shipapi.ExecShellRequest) (*exec.Cmd, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, apierr.New(shipapi.CodeBadRequest, "command must not be empty")
	}
	if req.Timeout != nil && *req.Timeout <= 0 {
		return nil, apierr.New(shipapi.CodeBadRequest, "timeout must be a positive number of seconds")
	}
	ws := r.cfg.Workspace
	dir := ws.Dir()
	if req.Cwd != nil && *req.Cwd != "" {
		rel, err := ws.Rel(*req.Cwd)
		if err == nil {
			err = ws.Do(func() error {
				fi, err := ws.Root().Stat(rel)
				if err != nil {
					return ws.Classify(rel, err)
				}
				if !fi.IsDir() {
					return apierr.New(shipapi.CodeNotDirectory, "not a directory: "+ws.Abs(rel))
				}
				return nil
			})
		}
		if err != nil {
			// The file API's code (access_denied for an escape, not_found, not_directory,
			// invalid_path), so callers treat a cwd as they treat a path.
			return nil, apierr.Wrap(apierr.CodeOf(err), err, "cwd: "+apierr.MessageOf(err))
		}
		dir = ws.Abs(rel)
	}
	var cmd *exec.Cmd
	if req.Shell == nil || *req.Shell {
		cmd = exec.Command("bash", "-lc", req.Command)
	} else {
		argv, err := SplitArgs(req.Command)
		if err != nil {
			return nil, apierr.Wrap(shipapi.CodeBadRequest, err, "cannot split command: "+err.Error())
		}
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = dir
	cmd.Env = r.env(dir, req.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cfg.User.Apply(cmd.SysProcAttr)
	cmd.WaitDelay = r.cfg.PipeGrace
	return cmd, nil
}

// start builds and starts the command of req, with wire connecting its
// output. When the sandbox ran out of processes (EAGAIN from fork: its pids
// limit; or, under gVisor, the user's tasks filling RLIMIT_NPROC, found before
// the start) it kills every process of the sandbox user and tries (once more);
// notice then says so. A start that fails for
// another reason is reported in the response (resp non-nil), as the
// reference did.
func (r *Runner) start(req shipapi.ExecShellRequest, wire func(*exec.Cmd)) (cmd *exec.Cmd, notice string, resp *shipapi.ExecShellResponse, err error) {
	if r.cfg.User.AtProcessLimit() {
		notice = Exhausted(r.cfg.User, r.cfg.Log)
	}
	for attempt := 0; ; attempt++ {
		cmd, err = r.prepare(req)
		if err != nil {
			return nil, "", nil, err
		}
		wire(cmd)
		serr := cmd.Start()
		if serr == nil {
			return cmd, notice, nil, nil
		}
		if !errors.Is(serr, syscall.EAGAIN) {
			return nil, "", failure("failed to start command: " + serr.Error()), nil
		}
		if attempt > 0 || r.cfg.User == nil {
			return nil, "", nil, apierr.Wrap(shipapi.CodeResourcesExhausted, serr,
				strings.TrimSpace("Cannot start the command: the sandbox has no process left (pids limit reached). "+notice))
		}
		notice = Exhausted(r.cfg.User, r.cfg.Log)
	}
}

// Exhausted kills every process of the sandbox user after a start failed
// for lack of processes, and returns the notice that says so.
func Exhausted(u *privsep.User, log *slog.Logger) string {
	n, err := u.KillAll()
	if err != nil {
		log.Error("pids limit reached; killing the sandbox user's processes failed", "err", err)
		return fmt.Sprintf("The sandbox had reached its process limit and ship failed to kill the sandbox user's %d processes.", n)
	}
	log.Warn("pids limit reached: killed every process of the sandbox user", "killed", n)
	return fmt.Sprintf("The sandbox had reached its process limit: ship killed all %d processes of the sandbox user (background processes, terminals and the Python kernel included, which restarts with its state lost) and tried again.", n)
}

// Start builds and starts the command of req as shell exec does (the sandbox
// user, a process group of its own, the workspace-confined cwd, the retry
// after a pids-limit exhaustion), with wire connecting its input and output.
// Its timeout and background fields are ignored: the caller manages the
// process. A start that fails for another reason than the request is an
// error with the message shell exec would have answered.
func (r *Runner) Start(req shipapi.ExecShellRequest, wire func(*exec.Cmd)) (cmd *exec.Cmd, notice string, err error) {
	cmd, notice, fail, err := r.start(req, wire)
	if err == nil && fail != nil {
		err = apierr.New(shipapi.CodeInternal, *fail.Error)
	}
	return cmd, notice, err
}

func failure(msg string) *shipapi.ExecShellResponse {
	return &shipapi.ExecShellResponse{Success: false, ReturnCode: -1, Error: &msg}
}

func (r *Runner) env(dir string, extra map[string]string) []string {
	set := map[string]string{
		"HOME":    r.cfg.Workspace.Dir(),
		"PWD":     dir,
		"SHELL":   "/bin/bash",
		"USER":    r.user,
		"LOGNAME": r.user,
	}
	base := r.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(set)+len(extra)+1)
	hasLang := false
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		if _, ok := extra[k]; ok {
			continue
		}
		if k == "LANG" {
			hasLang = true
		}
		env = append(env, kv)
	}
	if !hasLang {
		if _, ok := extra["LANG"]; !ok {
			env = append(env, "LANG=C.UTF-8")
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func (r *Runner) timeout(req shipapi.ExecShellRequest) time.Duration {
	d := r.cfg.DefaultTimeout
	if req.Timeout != nil {
		d = time.Duration(*req.Timeout) * time.Second
	}
	if r.cfg.MaxTimeout > 0 && d > r.cfg.MaxTimeout {
		d = r.cfg.MaxTimeout
	}
	return d
}

// Exec runs a command in the foreground, or starts it in the background when
// req.Background is set. Errors are bad requests (an invalid cwd included)
// and resources_exhausted; everything about the command itself (timeouts,
// spawn failures) is reported in the response.
func (r *Runner) Exec(ctx context.Context, req shipapi.ExecShellRequest) (shipapi.ExecShellResponse, error) {
	if req.Background {
		return r.startBackground(req)
	}
	stdout := &capBuffer{max: r.cfg.MaxStdout}
	stderr := &capBuffer{max: r.cfg.MaxStderr}
	cmd, notice, fail, err := r.start(req, func(c *exec.Cmd) { c.Stdout, c.Stderr = stdout, stderr })
	if err != nil {
		return shipapi.ExecShellResponse{}, err
	}
	if fail != nil {
		return *fail, nil
	}
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	timeout := r.timeout(req)
	t := time.NewTimer(timeout)
	defer t.Stop()
	var werr error
	timedOut := false
	select {
	case werr = <-done:
	case <-t.C:
		timedOut = true
		killGroup(pid)
		werr = <-done
	case <-ctx.Done():
		killGroup(pid)
		<-done
		return shipapi.ExecShellResponse{}, apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled")
	}
	resp := shipapi.ExecShellResponse{
		Notice:          notice,
		PID:             &pid,
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
	}
	if timedOut {
		msg := fmt.Sprintf("Command timed out after %s seconds", secs(timeout))
		resp.ReturnCode, resp.Error, resp.TimedOut = -1, &msg, true
		return resp, nil
	}
	resp.ReturnCode = ExitCode(cmd.ProcessState)
	if werr != nil && !errors.Is(werr, exec.ErrWaitDelay) {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			msg := "waiting for command: " + werr.Error()
			resp.Error = &msg
		}
	}
	resp.Success = resp.ReturnCode == 0 && resp.Error == nil
	return resp, nil
}

func secs(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d", int(d/time.Second))
	}
	return fmt.Sprintf("%g", d.Seconds())
}

// ExitCode follows Python's subprocess: -N when killed by signal N.
func ExitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}

// killGroup SIGKILLs the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// capBuffer keeps the first max bytes written and counts the rest. Writes
// never fail, so the child is never blocked or broken by a full buffer.
type capBuffer struct {
	mu        sync.Mutex
	max       int
	b         []byte
	truncated bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.b)
	if room >= len(p) {
		c.b = append(c.b, p...)
	} else {
		if room > 0 {
			c.b = append(c.b, p[:room]...)
		}
		c.truncated = true
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

func (c *capBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}

// SplitArgs splits a command line with POSIX shell quoting rules (quotes and
// backslashes; no expansions), as Python's shlex.split does.
func SplitArgs(s string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		inArg bool
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(rs) && strings.ContainsRune("\\\"$`\n", rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inArg = c, true
		case c == '\\':
			if i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
				inArg = true
			}
		case c == ' ' || c == '\t' || c == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(c)
			inArg = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return args, nil
}
