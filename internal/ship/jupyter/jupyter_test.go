package jupyter

import (
	"context"
	"os"
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
