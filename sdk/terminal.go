package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// TerminalConn is an interactive PTY session in a sandbox, attached through bay's
// GET /v1/sandboxes/{id}/terminal WebSocket (a proxy of ship's /term/ws). Read returns the
// terminal's output bytes (binary-safe, frame boundaries are not preserved), Write sends
// keystrokes as binary frames, Resize sends {"type":"resize","cols":C,"rows":R} as a text
// frame. When the remote shell exits bay closes the socket and Read returns io.EOF; then
// ExitStatus says with which status.
//
// One goroutine may Read while others Write or Resize.
type TerminalConn struct {
	conn *websocket.Conn
	ctx  context.Context

	rmu  sync.Mutex
	cur  io.Reader
	exit int // the shell's exit status + 1 once known (0: unknown)
}

// ExitStatus returns the remote shell's exit status once Read returned io.EOF because the
// shell exited (128+N when signal N ended it); ok is false before that, or when the session
// ended otherwise (closed by this side, or by bay).
func (t *TerminalConn) ExitStatus() (status int, ok bool) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.exit - 1, t.exit > 0
}

// Terminal opens an interactive terminal of cols x rows (0 = ship's default 80x24). ctx
// bounds the whole session: cancelling it closes the terminal. Errors before the upgrade
// are *Error like every other call (not_found, session_not_ready, capability_not_supported,
// unauthorized).
func (c *Client) Terminal(ctx context.Context, id string, cols, rows int) (*TerminalConn, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	u := *c.base
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	u.Path = c.base.Path + sbPath(bayapi.PathTerminal, id)
	q := url.Values{}
	if cols > 0 {
		q.Set("cols", strconv.Itoa(cols))
	}
	if rows > 0 {
		q.Set("rows", strconv.Itoa(rows))
	}
	u.RawQuery = q.Encode()
	h := http.Header{}
	c.setHeaders(h)
	h.Del("Accept")
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var raw []byte
			if resp.Body != nil {
				raw, _ = io.ReadAll(resp.Body)
			}
			return nil, decodeError(resp.StatusCode, resp.Header.Get(bayapi.HeaderRequestID), raw)
		}
		return nil, fmt.Errorf("sdk: terminal %s: %w", id, err)
	}
	conn.SetReadLimit(16 << 20)
	return &TerminalConn{conn: conn, ctx: ctx}, nil
}

// Read reads terminal output. It returns io.EOF once the remote side closed the terminal
// normally (the shell exited).
func (t *TerminalConn) Read(p []byte) (int, error) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	for {
		if t.cur == nil {
			_, r, err := t.conn.Reader(t.ctx)
			if err != nil {
				return 0, t.mapErr(err)
			}
			t.cur = r
		}
		n, err := t.cur.Read(p)
		if errors.Is(err, io.EOF) {
			t.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			return n, t.mapErr(err)
		}
		return n, nil
	}
}

func (t *TerminalConn) mapErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure {
		if s, ok := strings.CutPrefix(ce.Reason, shipapi.TerminalExitReason); ok {
			if n, perr := strconv.Atoi(s); perr == nil && n >= 0 && n <= 255 {
				t.exit = n + 1
			}
		}
	}
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return io.EOF
	}
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return fmt.Errorf("sdk: terminal read: %w", err)
}

// Write sends p to the terminal's input as one binary frame.
func (t *TerminalConn) Write(p []byte) (int, error) {
	if err := t.conn.Write(t.ctx, websocket.MessageBinary, p); err != nil {
		return 0, fmt.Errorf("sdk: terminal write: %w", err)
	}
	return len(p), nil
}

// ResizeMessage is the text frame that resizes the PTY.
type ResizeMessage struct {
	Type string `json:"type"` // "resize"
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// Resize changes the PTY's window size.
func (t *TerminalConn) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(ResizeMessage{Type: "resize", Cols: cols, Rows: rows})
	if err := t.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("sdk: terminal resize: %w", err)
	}
	return nil
}

// Close ends the session (the remote shell is killed by ship).
func (t *TerminalConn) Close() error {
	err := t.conn.Close(websocket.StatusNormalClosure, "")
	if err != nil && websocket.CloseStatus(err) == -1 && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
