package httpapi_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// TestTerminalKeyAsSubprotocol opens the terminal as a browser does: the key offered as a
// subprotocol, no Authorization header; bay answers with the terminal's subprotocol only, and a
// wrong key offered that way is refused before the upgrade like a wrong header.
func TestTerminalKeyAsSubprotocol(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	url := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/v1/sandboxes/" + id + "/terminal?cols=100&rows=30"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offer := func(key string) []string {
		return []string{bayapi.TerminalSubprotocol, bayapi.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(key))}
	}
	_, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: offer("not-a-valid-token")})
	if err == nil || res == nil || res.StatusCode != 401 {
		t.Fatalf("wrong key: %v %v", err, res)
	}
	_, res, err = websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: offer("bob-key")})
	if err == nil || res == nil || res.StatusCode != 404 {
		t.Fatalf("other owner: %v %v", err, res)
	}
	c, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: offer("alice-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if got := res.Header.Get("Sec-WebSocket-Protocol"); got != bayapi.TerminalSubprotocol || c.Subprotocol() != bayapi.TerminalSubprotocol {
		t.Fatalf("answered subprotocol %q", got)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "100x30: ls\r" {
		t.Fatalf("echo: %q %v", b, err)
	}
	c.Close(websocket.StatusNormalClosure, "bye")
}
