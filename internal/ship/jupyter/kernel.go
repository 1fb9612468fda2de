package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
)

// KernelConfig describes how to launch a kernel process.
type KernelConfig struct {
	Python string   // interpreter with ipykernel installed
	Dir    string   // working directory (the workspace)
	Env    []string // full environment of the kernel process
	// InitCode runs silently once the kernel is ready (e.g. matplotlib setup).
	InitCode string
	// InterruptMode is "signal" (SIGINT to the kernel's process group, what
	// jupyter_client does for ipykernel) or "message" (interrupt_request on
	// the control channel).
	InterruptMode string
	Transport     Transport
	Log           *slog.Logger
	// HeartbeatEvery is the heartbeat period; 0 disables the heartbeat.
	HeartbeatEvery time.Duration
	// User is the sandbox user the kernel runs as (nil: ship's own user). Its
	// private directory (connection file, IPYTHONDIR) belongs to that user.
	User *privsep.User
}

// Kernel is one running kernel process and its client.
type Kernel struct {
	cfg    KernelConfig
	cmd    *exec.Cmd
	Client *Client
	dir    string // private dir holding the connection file
	ci     ConnectionInfo

	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // set before exited is closed
	stop    chan struct{}
	once    sync.Once
}

// StartKernel launches a kernel, connects to it, waits until it is ready
// (kernel_info round trip seen on iopub) and runs cfg.InitCode.
// ctx bounds the whole start; the kernel process outlives ctx.
// The kernel keeps no IPython history database, and its IPYTHONDIR is a
// private directory removed with the kernel unless cfg.Env sets one.
func StartKernel(ctx context.Context, cfg KernelConfig) (*Kernel, error) {
	if cfg.Transport == nil {
		cfg.Transport = ZMQ4{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.InterruptMode == "" {
		cfg.InterruptMode = "signal"
	}
	for attempt := 1; ; attempt++ {
		k, err := startKernelOnce(ctx, cfg)
		// The ports are free when chosen but released before the kernel binds them; another
		// process (an outgoing connection's ephemeral port, on a busy host) may take one in
		// between. The kernel then exits at once, and new ports almost surely do.
		if err == nil || attempt == portAttempts || ctx.Err() != nil || !strings.Contains(err.Error(), "Address already in use") {
			return k, err
		}
		cfg.Log.Warn("kernel lost a port race, starting it on other ports", "attempt", attempt, "err", err)
	}
}

// portAttempts bounds the starts of one StartKernel that fail on a taken port.
const portAttempts = 3

func startKernelOnce(ctx context.Context, cfg KernelConfig) (*Kernel, error) {
	ci, err := newConnectionInfo()
	if err != nil {
		return nil, err
	}
	var dir string
	if err := cfg.User.Do(func() (err error) {
		dir, err = os.MkdirTemp("", "ship-kernel-")
		return err
	}); err != nil {
		return nil, fmt.Errorf("kernel connection dir: %w", err)
	}
	k := &Kernel{cfg: cfg, dir: dir, ci: ci, exited: make(chan struct{}), stop: make(chan struct{})}
	fail := func(err error) (*Kernel, error) {
		k.kill()
		k.cleanup()
		return nil, err
	}
	cf := filepath.Join(dir, "kernel.json")
	b, _ := json.Marshal(ci)
	var env []string
	if err := cfg.User.Do(func() (err error) {
		if err := os.WriteFile(cf, b, 0o600); err != nil {
			return fmt.Errorf("write connection file: %w", err)
		}
		env, err = kernelEnv(cfg.Env, dir)
		return err
	}); err != nil {
		return fail(err)
	}
	// No IPython history database: with it every execute_request with
	// store_history (which keeps execution_count, _ and Out going) also
	// writes the cell to an SQLite file (+1.7-2.7 ms per round trip).
	cmd := exec.Command(cfg.Python, "-m", "ipykernel_launcher", "-f", cf, "--HistoryManager.enabled=False")
	cmd.Dir = cfg.Dir
	cmd.Env = env
	// Own process group: ipykernel's interrupt handler signals its whole
	// group, and we signal/kill the group (the kernel's children too).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cfg.User.Apply(cmd.SysProcAttr)
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	cmd.Stdout = stderr
	// Children of the kernel may inherit these pipes; do not let them hold up Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		k.cleanup()
		return nil, fmt.Errorf("start kernel %s: %w", cfg.Python, err)
	}
	k.cmd = cmd
	go func() {
		k.waitErr = cmd.Wait()
		close(k.exited)
	}()

	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // stop dialling as soon as the process dies
		select {
		case <-k.exited:
			cancel()
		case <-dctx.Done():
		}
	}()
	cl, err := Dial(dctx, cfg.Transport, ci, cfg.Log)
	if err != nil {
		return fail(k.startErr("connect to kernel", err, stderr))
	}
	k.Client = cl
	if _, err := cl.KernelInfo(dctx); err != nil {
		return fail(k.startErr("kernel not ready", err, stderr))
	}
	if cfg.InitCode != "" {
		ex, err := cl.Execute(cfg.InitCode, true)
		if err != nil {
			return fail(k.startErr("kernel init", err, stderr))
		}
		err = ex.Wait(dctx, k.exited)
		ex.Close()
		if err != nil {
			return fail(k.startErr("kernel init", err, stderr))
		}
		if r := ex.Result(); r.Status != "ok" {
			cfg.Log.Warn("kernel init code failed", "error", r.Error)
		}
	}
	if cfg.HeartbeatEvery > 0 {
		go k.heartbeat()
	}
	return k, nil
}

// kernelEnv is env plus IPYTHONDIR in the kernel's private directory, unless
// env sets IPYTHONDIR: IPython otherwise creates $HOME/.ipython, and HOME is
// the user's workspace. The directory (0700, inside the 0700 dir) goes with
// the kernel's other files when the kernel stops.
func kernelEnv(env []string, dir string) ([]string, error) {
	for _, e := range env {
		if strings.HasPrefix(e, "IPYTHONDIR=") {
			return env, nil
		}
	}
	ipy := filepath.Join(dir, "ipython")
	if err := os.Mkdir(ipy, 0o700); err != nil {
		return nil, fmt.Errorf("kernel IPYTHONDIR: %w", err)
	}
	return append(slices.Clip(env), "IPYTHONDIR="+ipy), nil
}

func (k *Kernel) startErr(what string, err error, out *tailBuffer) error {
	select {
	case <-k.exited:
		return fmt.Errorf("%s: kernel process exited (%v): %s", what, k.waitErr, strings.TrimSpace(out.String()))
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// PID is the kernel process id.
func (k *Kernel) PID() int { return k.cmd.Process.Pid }

// Exited is closed once the kernel process has exited and been reaped.
func (k *Kernel) Exited() <-chan struct{} { return k.exited }

// ExitErr is the process's wait error; valid after Exited is closed.
func (k *Kernel) ExitErr() error { return k.waitErr }

// Interrupt interrupts the running cell; the kernel keeps its state.
func (k *Kernel) Interrupt() error {
	if k.cfg.InterruptMode == "message" {
		return k.Client.Interrupt()
	}
	if err := syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("interrupt kernel %d: %w", k.cmd.Process.Pid, err)
	}
	return nil
}

// Shutdown asks the kernel to exit, then kills its process group if it has
// not exited when ctx ends; it always releases every resource.
func (k *Kernel) Shutdown(ctx context.Context) {
	k.once.Do(func() { close(k.stop) })
	if k.Client != nil {
		_ = k.Client.Shutdown(ctx)
	}
	select {
	case <-k.exited:
	case <-ctx.Done():
	}
	k.kill()
	k.cleanup()
}

// Kill kills the kernel's process group and releases every resource.
func (k *Kernel) Kill() {
	k.once.Do(func() { close(k.stop) })
	k.kill()
	k.cleanup()
}

func (k *Kernel) kill() {
	if k.cmd == nil || k.cmd.Process == nil {
		return
	}
	// The group may outlive the leader (children of the kernel): kill it anyway.
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.exited
}

func (k *Kernel) cleanup() {
	if k.Client != nil {
		k.Client.Close()
	}
	_ = k.cfg.User.Do(func() error { return os.RemoveAll(k.dir) })
}

// heartbeat kills the kernel after three missed heartbeats in a row (a hung
// kernel); the process monitor then reports it dead.
func (k *Kernel) heartbeat() {
	t := time.NewTicker(k.cfg.HeartbeatEvery)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-k.stop:
			return
		case <-k.exited:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Ping(ctx, k.cfg.Transport, k.ci)
		cancel()
		if err == nil {
			misses = 0
			continue
		}
		misses++
		k.cfg.Log.Warn("kernel heartbeat missed", "misses", misses, "err", err)
		if misses >= 3 {
			k.cfg.Log.Error("kernel not answering heartbeats, killing it", "pid", k.PID())
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
			return
		}
	}
}

// reservePorts picks a kernel's ports; tests replace it to make a start lose the race.
var reservePorts = freePorts

func newConnectionInfo() (ConnectionInfo, error) {
	ports, err := reservePorts(5)
	if err != nil {
		return ConnectionInfo{}, err
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	return ConnectionInfo{
		IP: "127.0.0.1", Transport: "tcp",
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		Key: hex.EncodeToString(key[:]), SignatureScheme: "hmac-sha256", KernelName: "python3",
	}, nil
}

// freePorts asks the OS for n distinct free loopback ports. They are released
// before the kernel binds them, as jupyter_client does; a lost race makes the
// kernel exit and the start fail (the manager then retries).
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve kernel port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written (kernel stderr for errors).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
