package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// ptyReader collects what the CLI writes to the pseudo-terminal.
type ptyReader struct {
	ch  chan []byte
	buf []byte
}

func newPTYReader(master *os.File) *ptyReader {
	r := &ptyReader{ch: make(chan []byte, 64)}
	go func() {
		defer close(r.ch)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			if n > 0 {
				r.ch <- append([]byte(nil), b[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// waitFor reads until want appeared (10 s budget for a slow machine; not a timing assertion).
func (r *ptyReader) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !bytes.Contains(r.buf, []byte(want)) {
		select {
		case b, ok := <-r.ch:
			if !ok {
				t.Fatalf("pty closed waiting for %q; got %q", want, r.buf)
			}
			r.buf = append(r.buf, b...)
		case <-deadline:
			t.Fatalf("no %q in %q", want, r.buf)
		}
	}
	i := bytes.Index(r.buf, []byte(want))
	r.buf = r.buf[i+len(want):]
}

// TestTermThroughPTY attaches `shipyard term` to a pseudo-terminal: the line typed is
// echoed by the fake remote shell, a window resize reaches bay as a resize message, Ctrl-D
// ends the session with exit status 0 and the terminal's mode is restored.
func TestTermThroughPTY(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)

	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	before, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "term", id)
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+fake.URL, "SHIPYARD_TOKEN=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	out := newPTYReader(master)

	out.waitFor(t, "$ ")
	during, _ := term.GetState(int(tty.Fd()))
	if reflect.DeepEqual(before, during) {
		t.Error("terminal not in raw mode during the session")
	}
	// A binary-safe line: UTF-8 and a high byte pass through untouched.
	master.Write([]byte("héllo \x01x\r"))
	out.waitFor(t, "echo: héllo \x01x\r\n$ ")

	// SIGWINCH → resize message.
	if err := pty.Setsize(tty, &pty.Winsize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sizes := fake.TerminalSizes()
		if len(sizes) >= 2 && sizes[len(sizes)-1] == [2]int{132, 43} {
			if sizes[0] != [2]int{100, 30} {
				t.Fatalf("initial size %v", sizes[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resize not forwarded: %v", sizes)
		}
		time.Sleep(20 * time.Millisecond)
	}

	master.Write([]byte{0x04}) // Ctrl-D: the remote shell exits
	out.waitFor(t, "exit\r\n")
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("exit status %d", ee.ExitCode())
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("shipyard term did not exit after Ctrl-D")
	}
	after, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatal("terminal mode not restored")
	}
}

// TestTermWithoutTTY pipes input: lines are sent, the end of input sends Ctrl-D.
func TestTermWithoutTTY(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	r := run(t, fake.URL, "one\rtwo\r", "term", id)
	if r.code != 0 || !strings.Contains(r.stdout, "echo: one") || !strings.Contains(r.stdout, "echo: two") || !strings.HasSuffix(r.stdout, "exit\r\n") {
		t.Fatalf("%+v", r)
	}
	// The remote shell's exit status is the command's.
	if r := run(t, fake.URL, "exit 3\r", "term", id); r.code != 3 {
		t.Fatalf("exit 3 in the remote shell: %+v", r)
	}
	if r := run(t, fake.URL, "", "term", "sandbox-nope"); r.code != 66 {
		t.Fatalf("missing sandbox: %+v", r)
	}
}
