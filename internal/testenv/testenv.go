// Package testenv starts the real `bay` binary as a child process for the programs and tests
// that exercise the whole system (e2e, the clients' real-bay tests, the benchmarks): a
// generated config.yaml (SQLite file in a directory of the caller's, Docker driver, an API
// key), the process with its output in a log writer, and a wait for /health.
//
// It does not depend on package testing (benchmark programs use it) and links nothing of
// internal/bay: it talks to bay over HTTP only.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// HostFirewallTable is the nftables table (family inet) a real bay installs as its sandbox
// firewall (internal/bay/netguard) and never removes.
const HostFirewallTable = "shipyard"

// KeepHostFirewallAsFound notes whether bay's firewall table exists and returns a function
// that deletes it again if it did not; call that after every bay of the run has stopped, so
// that a test run leaves the machine as it found it.
func KeepHostFirewallAsFound() (restore func()) {
	if exec.Command("nft", "list", "table", "inet", HostFirewallTable).Run() == nil {
		return func() {}
	}
	return func() { _ = exec.Command("nft", "delete", "table", "inet", HostFirewallTable).Run() }
}

// Answer writes reply to every connection ln accepts, then closes it, until ln is closed: a
// listener a test places somewhere to see whether it can be reached.
func Answer(ln net.Listener, reply []byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write(reply)
		c.Close()
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Config is the part of bay's config.yaml that every harness shares: the server on
// 127.0.0.1:Port, the SQLite file DataDir/bay.db (or DatabaseURL), the Docker driver
// (connect_mode auto), the API key with anonymous access off, and GC off under InstanceID. The
// harness's own settings go in the fragments, raw YAML that YAML pastes in place.
type Config struct {
	Port    int
	DataDir string
	// DatabaseURL replaces the SQLite file when set (a postgres:// URL: several bays share it).
	DatabaseURL string
	APIKey      string
	InstanceID  string
	// Driver holds extra lines of the driver block, indented two spaces.
	Driver string
	// GC holds extra lines of the gc block, indented two spaces.
	GC string
	// Extra is top-level YAML appended at the end (profiles, warm_pool, ...).
	Extra string
}

// URL is the base URL bay serves on with this configuration.
func (c Config) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", c.Port) }

// Database is the database URL the configuration names.
func (c Config) Database() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	return "sqlite:///" + c.DataDir + "/bay.db"
}

// YAML renders the configuration file.
func (c Config) YAML() string {
	return fmt.Sprintf(`server:
  host: "127.0.0.1"
  port: %d
database:
  url: %q
driver:
  type: docker
%s  docker:
    connect_mode: auto
security:
  api_key: %q
  allow_anonymous: false
gc:
  enabled: false
  run_on_startup: false
  instance_id: %q
%s%s`, c.Port, c.Database(), c.Driver, c.APIKey, c.InstanceID, c.GC, c.Extra)
}

// LogBuffer is an in-memory log that the process writes while others read it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BayOptions describe one bay process.
type BayOptions struct {
	// Binary is the path of the bay executable.
	Binary string
	// Args are its arguments; empty means ["serve"].
	Args []string
	// Dir is the working directory and BAY_DATA_DIR; Config is written to Dir/config.yaml and
	// named by BAY_CONFIG_FILE.
	Dir    string
	Config string
	// URL is the base URL bay serves on (Config.URL); WaitHealthy polls its /health.
	URL string
	// Env is added to the environment after os.Environ and the two variables above.
	Env []string
	// Log receives stdout and stderr; nil discards them. It must be safe for concurrent use
	// when something else writes or reads it while bay runs (LogBuffer, *os.File).
	Log io.Writer
	// OwnProcessGroup starts bay in a process group of its own and signals the group; by
	// default bay shares the caller's group, so an interrupt at the terminal reaches it too.
	OwnProcessGroup bool
}

// ErrExited is wrapped by WaitHealthy when bay ended before answering.
var ErrExited = errors.New("bay exited before becoming healthy")

// BayProcess is a running (or ended) bay started by StartBay.
type BayProcess struct {
	URL        string
	ConfigPath string
	cmd        *exec.Cmd
	group      bool
	done       chan struct{}
	err        error // the exit error, set before done closes
}

// StartBay writes the configuration, starts bay and waits until /health answers 200 within
// ctx. When bay does not get healthy it is killed and waited for before the error returns.
// ctx bounds only the start-up: the process runs until Kill, Terminate or Stop.
func StartBay(ctx context.Context, o BayOptions) (*BayProcess, error) {
	cfgPath := filepath.Join(o.Dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(o.Config), 0o600); err != nil {
		return nil, fmt.Errorf("write bay config: %w", err)
	}
	args := o.Args
	if len(args) == 0 {
		args = []string{"serve"}
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "BAY_CONFIG_FILE="+cfgPath, "BAY_DATA_DIR="+o.Dir)
	cmd.Env = append(cmd.Env, o.Env...)
	if o.Log != nil {
		cmd.Stdout, cmd.Stderr = o.Log, o.Log
	}
	if o.OwnProcessGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bay: %w", err)
	}
	p := &BayProcess{URL: o.URL, ConfigPath: cfgPath, cmd: cmd, group: o.OwnProcessGroup, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := p.WaitHealthy(ctx); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// WaitHealthy polls URL/health every 20 ms until it answers 200; it fails when ctx ends or
// the process exits first (wrapping ErrExited).
func (p *BayProcess) WaitHealthy(ctx context.Context) error {
	url := p.URL + bayapi.PathHealth
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("bay health: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
		}
		last = err
		select {
		case <-p.done:
			return fmt.Errorf("%w (%v)", ErrExited, p.err)
		case <-ctx.Done():
			return fmt.Errorf("bay did not become healthy: %w (last: %v)", context.Cause(ctx), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID is the process id.
func (p *BayProcess) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process has ended.
func (p *BayProcess) Exited() <-chan struct{} { return p.done }

// Wait waits for the process to end and returns its exit error.
func (p *BayProcess) Wait() error {
	<-p.done
	return p.err
}

func (p *BayProcess) signal(sig syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		return
	}
	_ = p.cmd.Process.Signal(sig)
}

// Kill ends the process with SIGKILL (no drain, no cleanup) and waits for it.
func (p *BayProcess) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// Terminate sends SIGTERM and waits up to timeout for the exit. It returns an error when bay
// is still running then, otherwise the exit error (nil for a clean exit or death by signal).
func (p *BayProcess) Terminate(timeout time.Duration) error {
	select {
	case <-p.done:
		return exitErr(p.err)
	default:
	}
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return exitErr(p.err)
	case <-t.C:
		return fmt.Errorf("bay did not stop within %s of SIGTERM", timeout)
	}
}

// Stop is Terminate with grace, then Kill when bay is still running; it returns an error when
// it had to kill, otherwise as Terminate.
func (p *BayProcess) Stop(grace time.Duration) error {
	err := p.Terminate(grace)
	select {
	case <-p.done:
		return err
	default:
	}
	p.Kill()
	return fmt.Errorf("bay killed after %s without exiting on SIGTERM", grace)
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return err
}

// BuildBay builds ./cmd/bay of the module rooted at root into a new temporary directory and
// returns the binary and a function that removes the directory. Test packages that run the
// real bay build it once in TestMain.
func BuildBay(root string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "shipyard-bay-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("build bay: %w", err)
	}
	bin = filepath.Join(dir, "bay")
	build := exec.Command("go", "build", "-o", bin, "./cmd/bay")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build ./cmd/bay: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}
