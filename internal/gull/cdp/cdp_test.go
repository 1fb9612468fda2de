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
// event on the caller's session followed by the answer, "Hang" nothing ever;
// "Detach" and "Crash" end the page of params.sessionId (the event Chromium
// sends when a page closes or its renderer dies) and answer.
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
			case "Detach", "Crash": // the target of params.sessionId goes away
				var p struct {
					SessionID string `json:"sessionId"`
				}
				json.Unmarshal(m.Params, &p)
				ev := map[string]any{"method": "Target.detachedFromTarget", "params": map[string]any{"sessionId": p.SessionID}}
				if m.Method == "Crash" {
					ev = map[string]any{"method": "Inspector.targetCrashed", "sessionId": p.SessionID, "params": map[string]any{}}
				}
				b, _ := json.Marshal(ev)
				outW.Write(append(b, 0))
				reply = map[string]any{"id": m.ID, "result": map[string]any{}}
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

// TestCallOnClosedTarget: Chromium never answers a command that was in
// flight on a page's session when the page closed (window.close(), a closed
// tab) or its renderer died; the call must end then, not wait for its
// context (or forever without a deadline), and calls on other sessions must
// go on waiting.
func TestCallOnClosedTarget(t *testing.T) {
	c, closeIt := fakeBrowser(t)
	defer closeIt()
	for _, how := range []string{"Detach", "Crash"} {
		errc := make(chan error, 1)
		go func() { errc <- c.Call(context.Background(), "P-"+how, "Hang", nil, nil) }()
		other := make(chan error, 1)
		octx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		go func() { other <- c.Call(octx, "Q", "Hang", nil, nil) }()
		time.Sleep(50 * time.Millisecond) // both calls are written
		if err := c.Call(context.Background(), "", how, map[string]string{"sessionId": "P-" + how}, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, ErrTargetClosed) {
				t.Errorf("%s: call on the closed page = %v", how, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the call on the closed page still waits", how)
		}
		if err := <-other; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: call on another page = %v, want its own deadline", how, err)
		}
		cancel()
	}
}

// TestWriteToStuckBrowser: a browser that does not read its pipe blocks the
// write of a command; the call still ends with its context, and so does the
// next one, which waits behind the first write.
func TestWriteToStuckBrowser(t *testing.T) {
	outR, outW := io.Pipe() // never written: no answer
	cmdR, cmdW := io.Pipe() // never read: every write blocks
	defer outW.Close()
	defer cmdR.Close()
	c := New(outR, cmdW)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		errc := make(chan error, 1)
		go func() { errc <- c.Call(ctx, "", "Echo", nil, nil) }()
		select {
		case err := <-errc:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("call %d = %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d to a browser that does not read still waits", i)
		}
		cancel()
	}
}
