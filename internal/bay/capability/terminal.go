package capability

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// OpenTerminal ensures the sandbox runs (the terminal requires the shell capability) and opens
// a cols x rows terminal on its runtime; the caller relays it and closes it.
func (s *Service) OpenTerminal(ctx context.Context, owner, id string, cols, rows int) (*websocket.Conn, error) {
	var conn *websocket.Conn
	_, _, err := s.invoke(ctx, owner, id, bay.CapShell, callOpts{resend: true}, func(ctx context.Context, ep string) (err error) {
		conn, err = s.ship.DialTerminal(ctx, ep, cols, rows)
		return err
	})
	if err != nil {
		var be *bay.Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, bay.Errorf(bay.CodeShipError, "Terminal connection to the runtime failed").WithCause(err)
	}
	return conn, nil
}
