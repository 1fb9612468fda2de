package ship_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/internal/ship/pty"
)

// readUntil reads terminal output until re matches (or fails the test).
func readUntil(t *testing.T, ctx context.Context, c *websocket.Conn, out *strings.Builder, re *regexp.Regexp) []string {
	t.Helper()
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("reading terminal (waiting for %s): %v; output so far %q", re, err, out.String())
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("terminal output frame is %v, want binary", typ)
		}
		out.Write(data)
	}
}

func TestTerminal(t *testing.T) {
	d := newDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(d.url, "http", "ws", 1)+"/term/ws?cols=80&rows=24", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var out strings.Builder
	send := func(typ websocket.MessageType, s string) {
		if err := c.Write(ctx, typ, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// $((...)) makes the marker appear only in the output, not in the echo.
	send(websocket.MessageText, "echo MARK$((20+22)) PID=$$ PWD=$PWD\n")
	m := readUntil(t, ctx, c, &out, regexp.MustCompile(`MARK42 PID=(\d+) PWD=(\S+)`))
	pid, _ := strconv.Atoi(m[1])
	if m[2] != d.workspace {
		t.Fatalf("terminal cwd %q", m[2])
	}
	send(websocket.MessageText, `{"type":"resize","cols":123,"rows":45}`)
	send(websocket.MessageBinary, "stty size; echo SZ$((1))\n")
	readUntil(t, ctx, c, &out, regexp.MustCompile(`45 123\r?\n(.*\r?\n)?SZ1`))
	// A background job runs in its own process group; closing must end it too.
	send(websocket.MessageBinary, "sleep 100.7373 &\necho BG$((2))\n")
	readUntil(t, ctx, c, &out, regexp.MustCompile(`BG2`))
	poll(t, 5*time.Second, "job to start", func() bool { return len(procsWithArg("100.7373")) == 1 })
	if len(pty.SessionPIDs(pid)) < 2 {
		t.Fatalf("session %d: %v", pid, pty.SessionPIDs(pid))
	}
	c.Close(websocket.StatusNormalClosure, "")
	poll(t, 10*time.Second, "terminal session to end", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return len(pty.SessionPIDs(pid)) == 0 && len(procsWithArg("100.7373")) == 0 && os.IsNotExist(err)
	})
}

// A shell that exits by itself closes the socket normally with its exit status as the reason.
func TestTerminalReportsTheShellsExitStatus(t *testing.T) {
	d := newDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct{ input, want string }{
		{"exit 3\n", "exit 3"},
		{"exit\n", "exit 0"},
		{"kill -KILL $$\n", "exit 137"},
	} {
		conn, _, err := websocket.Dial(ctx, strings.Replace(d.url, "http", "ws", 1)+"/term/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(ctx, websocket.MessageBinary, []byte(c.input)); err != nil {
			t.Fatal(err)
		}
		for {
			_, _, err = conn.Read(ctx)
			if err != nil {
				break
			}
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != c.want {
			t.Errorf("%q: the terminal ended with %v, want a normal closure %q", c.input, err, c.want)
		}
		conn.CloseNow()
	}
}
