package cdp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"
)

// fakeBrowser reads NUL-terminated commands and answers them like Chromium
// does on its pipe: "Echo" returns its params, "Fail" an error, "Emit" an
// event on the caller's session followed by the answer.
func fakeBrowser(t *testing.T) (*Conn, func()) {
	cmdR, cmdW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		br := bufio.NewReader(cmdR)
		for {
			msg, err := br.ReadBytes(0)
			if err != nil {
				outW.Close()
				return
			}
			var m message
			if err := json.Unmarshal(msg[:len(msg)-1], &m); err != nil {
				t.Errorf("bad command %q: %v", msg, err)
				continue
			}
			var reply any
			switch m.Method {
			case "Echo":
				reply = map[string]any{"id": m.ID, "sessionId": m.SessionID, "result": m.Params}
			case "Fail":
				reply = map[string]any{"id": m.ID, "error": map[string]any{"code": -32000, "message": "No node", "data": "detail"}}
			case "Emit":
				ev, _ := json.Marshal(map[string]any{"method": "Page.loadEventFired", "sessionId": m.SessionID, "params": map[string]any{"timestamp": 1}})
				outW.Write(append(ev, 0))
				reply = map[string]any{"id": m.ID, "result": map[string]any{}}
			case "Hang":
				continue
			}
			b, _ := json.Marshal(reply)
			outW.Write(append(b, 0))
		}
	}()
	c := New(outR, cmdW)
	return c, func() { cmdW.Close() }
}

func TestCallEventsErrors(t *testing.T) {
	c, closeIt := fakeBrowser(t)
	ctx := context.Background()
	var out struct {
		X string `json:"x"`
	}
	if err := c.Call(ctx, "S1", "Echo", map[string]string{"x": "héllo\x00"}, &out); err != nil || out.X != "héllo\x00" {
		t.Fatalf("Echo = %+v, %v", out, err)
	}
	err := c.Call(ctx, "", "Fail", nil, nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Message != "No node" || ce.Method != "Fail" || err.Error() != "Fail: No node (detail)" {
		t.Fatalf("Fail = %v", err)
	}
	events, stop := c.Subscribe("Page.loadEventFired")
	if err := c.Call(ctx, "S2", "Emit", nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.SessionID != "S2" || ev.Method != "Page.loadEventFired" {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	stop()
	stop() // twice is harmless

	hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Call(hctx, "", "Hang", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Hang = %v", err)
	}

	// The browser goes away: pending and later calls fail, subscriptions end.
	events, _ = c.Subscribe("X")
	closeIt()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not end")
	}
	if _, ok := <-events; ok {
		t.Error("subscription still open")
	}
	if err := c.Call(ctx, "", "Echo", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close = %v", err)
	}
}
