package sdktest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// terminal serves GET /v1/sandboxes/{id}/terminal: a WebSocket that behaves like a tiny PTY
// running a line-echo shell. It writes the prompt "$ ", echoes typed bytes, answers a line
// with "\r\necho: <line>\r\n$ ", handles backspace (0x7f) and Ctrl-C, and on Ctrl-D at the
// start of a line writes "exit\r\n" and closes the socket normally with the reason "exit 0" —
// like bash exiting through ship; the line "exit N" closes it with "exit N".
// Output is sent in binary frames; a text frame {"type":"resize",...} is recorded.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapTerminal) {
		return
	}
	cols, _ := strconv.Atoi(r.URL.Query().Get("cols"))
	rows, _ := strconv.Atoi(r.URL.Query().Get("rows"))
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	s.mu.Lock()
	s.termSizes = append(s.termSizes, [2]int{cols, rows})
	s.mu.Unlock()
	ctx := context.Background()
	send := func(b []byte) bool { return c.Write(ctx, websocket.MessageBinary, b) == nil }
	if !send([]byte("$ ")) {
		return
	}
	var line []byte
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageText {
			var rm struct {
				Type string `json:"type"`
				Cols int    `json:"cols"`
				Rows int    `json:"rows"`
			}
			if json.Unmarshal(msg, &rm) == nil && rm.Type == "resize" {
				s.mu.Lock()
				s.termSizes = append(s.termSizes, [2]int{rm.Cols, rm.Rows})
				s.mu.Unlock()
				continue
			}
		}
		for _, b := range msg {
			switch b {
			case 0x04: // Ctrl-D
				if len(line) == 0 {
					send([]byte("exit\r\n"))
					c.Close(websocket.StatusNormalClosure, shipapi.TerminalExitReason+"0")
					return
				}
			case 0x03: // Ctrl-C
				line = line[:0]
				send([]byte("^C\r\n$ "))
			case '\r', '\n':
				if n, ok := strings.CutPrefix(string(line), "exit "); ok {
					send([]byte("\r\n"))
					c.Close(websocket.StatusNormalClosure, shipapi.TerminalExitReason+n)
					return
				}
				out := append([]byte("\r\necho: "), line...)
				out = append(out, "\r\n$ "...)
				line = line[:0]
				send(out)
			case 0x7f:
				if len(line) > 0 {
					line = line[:len(line)-1]
					send([]byte("\b \b"))
				}
			default:
				line = append(line, b)
				send([]byte{b})
			}
		}
	}
}
