package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// terminal proxies a WebSocket to ship's /term/ws: same authentication as every endpoint, the
// sandbox is started first (errors come back as the usual JSON envelope, before the upgrade),
// frames are relayed both ways with their type, the idle deadline is refreshed while the
// terminal is open, and either side closing closes the other with the same code and reason.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	var is issues
	cols := queryInt(r, &is, "cols", 80, 1, 1000)
	rows := queryInt(r, &is, "rows", 24, 1, 1000)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("sandbox_id")
	up, err := s.caps.OpenTerminal(r.Context(), Owner(r.Context()), id, int(cols), int(rows))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A browser that offered its key as a subprotocol gets the terminal's own one back.
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{bayapi.TerminalSubprotocol}})
	if err != nil {
		up.Close(websocket.StatusInternalError, "client upgrade failed")
		return // Accept already answered
	}
	down.SetReadLimit(-1)

	// The request context ends when the handler returns; the relay owns its own.
	ctx, stop := context.WithCancel(context.WithoutCancel(r.Context()))
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- relay(ctx, down, up) }()
	go func() { errc <- relay(ctx, up, down) }()
	t := time.NewTicker(s.opts.TerminalTouchInterval)
	defer t.Stop()
	for {
		select {
		case err := <-errc:
			code := websocket.StatusNormalClosure
			reason := ""
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				// The reason too: ship's "exit N" is the shell's exit status for the client.
				code, reason = ce.Code, ce.Reason
			} else if err != nil && !errors.Is(err, context.Canceled) {
				code, reason = websocket.StatusGoingAway, "peer closed"
			}
			stop()
			_ = up.Close(code, reason)
			_ = down.Close(code, reason)
			return
		case <-t.C:
			tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.svc.Touch(tctx, id); err != nil {
				s.log.WarnContext(ctx, "terminal keepalive", "sandbox_id", id, "err", err)
			}
			tcancel()
		}
	}
}

// relay copies messages from src to dst until either fails.
func relay(ctx context.Context, dst, src *websocket.Conn) error {
	for {
		typ, b, err := src.Read(ctx)
		if err != nil {
			return err
		}
		if err := dst.Write(ctx, typ, b); err != nil {
			return err
		}
	}
}
