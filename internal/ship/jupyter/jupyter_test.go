package jupyter

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

func TestSignRoundTrip(t *testing.T) {
	s := signer{key: []byte("secret")}
	_, frames, err := s.encode("sess", "kernel_info_request", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	// A SUB topic and routing identities may precede the delimiter.
	m, err := s.decode(append([][]byte{[]byte("topic")}, frames...))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.MsgType != "kernel_info_request" || m.Header.Version != ProtocolVersion {
		t.Fatalf("header %+v", m.Header)
	}
	frames[5] = []byte(`{"tampered":true}`)
	if _, err := s.decode(frames); err != ErrBadSignature {
		t.Fatalf("tampered message: err %v, want ErrBadSignature", err)
	}
}

func TestStripANSI(t *testing.T) {
	in := "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"
	if got := StripANSI(in); got != "ZeroDivisionError: division by zero" {
		t.Fatalf("got %q", got)
	}
}

func startKernel(t *testing.T) *Kernel {
	t.Helper()
	py := shiptest.Python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := StartKernel(ctx, KernelConfig{Python: py, Dir: t.TempDir(), Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		k.Shutdown(ctx)
	})
	return k
}

func run(t *testing.T, k *Kernel, code string) Result {
	t.Helper()
	ex, err := k.Client.Execute(code, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ex.Wait(ctx, k.Exited()); err != nil {
		t.Fatal(err)
	}
	return ex.Result()
}

func TestKernelExecute(t *testing.T) {
	k := startKernel(t)
	r := run(t, k, "x = 20\nprint('hello')\nx + 22")
	if r.Status != "ok" || r.Text != "hello\n42" || r.ExecutionCount == nil {
		t.Fatalf("result %+v", r)
	}
	r = run(t, k, "1/0")
	if r.Status != "error" || !strings.Contains(r.Error, "ZeroDivisionError") || strings.Contains(r.Error, "\x1b[") {
		t.Fatalf("error result %+v", r)
	}
}

// TestKernelNoHistoryFile pins the kernel's IPython setup: no history
// database, no $HOME/.ipython (HOME is the user's workspace), while
// execution_count, _ and Out keep working.
func TestKernelNoHistoryFile(t *testing.T) {
	py := shiptest.Python(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := StartKernel(ctx, KernelConfig{Python: py, Dir: home, Env: append(os.Environ(), "HOME="+home)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		k.Shutdown(ctx)
	}()
	var counts []int
	for i, code := range []string{"40 + 1", "_ + 1", "Out[1] * 2"} {
		r := run(t, k, code)
		want := []string{"41", "42", "82"}[i]
		if r.Status != "ok" || r.Text != want || r.ExecutionCount == nil {
			t.Fatalf("cell %d %q: %+v, want %s", i+1, code, r, want)
		}
		counts = append(counts, *r.ExecutionCount)
	}
	if counts[0] != 1 || counts[1] != 2 || counts[2] != 3 {
		t.Fatalf("execution counts %v, want [1 2 3]", counts)
	}
	r := run(t, k, "import os\nip = get_ipython()\nprint(ip.history_manager.enabled, ip.ipython_dir == os.environ['IPYTHONDIR'])\nprint(ip.ipython_dir)")
	lines := strings.Split(r.Text, "\n")
	if r.Status != "ok" || len(lines) != 2 || lines[0] != "False True" {
		t.Fatalf("history manager / IPYTHONDIR: %+v", r)
	}
	ipyDir := lines[1]
	if !strings.HasPrefix(ipyDir, k.dir+string(os.PathSeparator)) {
		t.Fatalf("IPYTHONDIR %q is not in the kernel's private dir %q", ipyDir, k.dir)
	}
	if fi, err := os.Stat(ipyDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("IPYTHONDIR %v %v, want mode 0700", fi, err)
	}
	walk := func(root string) (found []string) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && (d.Name() == ".ipython" || strings.HasPrefix(d.Name(), "history.sqlite")) {
				found = append(found, p)
			}
			return nil
		})
		return found
	}
	if f := append(walk(home), walk(ipyDir)...); len(f) != 0 {
		t.Fatalf("IPython files written: %v", f)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	k.Shutdown(ctx2)
	if _, err := os.Stat(ipyDir); !os.IsNotExist(err) {
		t.Fatalf("IPYTHONDIR left after shutdown: %v", err)
	}
}

// An IPYTHONDIR in the kernel's environment is kept as given.
func TestKernelEnvKeepsIPythonDir(t *testing.T) {
	dir := t.TempDir()
	env := []string{"A=1", "IPYTHONDIR=/mine"}
	got, err := kernelEnv(env, dir)
	if err != nil || strings.Join(got, " ") != "A=1 IPYTHONDIR=/mine" {
		t.Fatalf("got %v %v", got, err)
	}
	got, err = kernelEnv([]string{"A=1"}, dir)
	if err != nil || strings.Join(got, " ") != "A=1 IPYTHONDIR="+filepath.Join(dir, "ipython") {
		t.Fatalf("got %v %v", got, err)
	}
}

// TestKernelStartLosesPortRace: a start whose port another process took between the choice
// and the kernel's bind is made again on other ports instead of failing.
func TestKernelStartLosesPortRace(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	reservePorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports, err
	}
	defer func() { reservePorts = freePorts }()
	k := startKernel(t)
	if r := run(t, k, "print(6*7)"); r.Text != "42" {
		t.Fatalf("result %+v", r)
	}
	if calls != 2 {
		t.Fatalf("%d port choices, want 2 (the first lost)", calls)
	}
}
