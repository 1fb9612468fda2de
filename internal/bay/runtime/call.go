package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// DoJSON sends body as JSON (nil = none) to the runtime called name ("Ship", "Gull") within
// timeout and decodes a 2xx answer into out. An answer of 400 or more goes to statusErr, which
// classifies it; a failure to get an answer at all is TransportError's.
func DoJSON(ctx context.Context, hc *http.Client, name, endpoint, method, path string, body, out any,
	timeout time.Duration, statusErr func(*http.Response) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return bay.Errorf(bay.CodeInternal, "%s request failed", name).WithCause(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+path, rd)
	if err != nil {
		return bay.Errorf(bay.CodeShipError, "%s request error: invalid endpoint", name).WithCause(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return TransportError(ctx, name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%w: %w", ErrForeign, statusErr(resp))
	}
	if resp.StatusCode >= 400 {
		return statusErr(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return TransportError(ctx, name, path, err)
		}
		return bay.Errorf(bay.CodeShipError, "%s returned an invalid response", name).WithCause(fmt.Errorf("decode %s: %w", path, err))
	}
	return nil
}

// TransportError classifies a failure to get any answer from the runtime called name: a
// timeout (the call's own deadline or the caller's), a cancel, or an unreachable runtime
// (ErrUnreachable, plus ErrNotSent when the connection could not even be opened).
func TransportError(ctx context.Context, name, path string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return bay.Errorf(bay.CodeTimeout, "%s request timed out: %s", name, path).WithCause(err)
	}
	if errors.Is(err, context.Canceled) {
		return bay.Errorf(bay.CodeShipError, "%s request cancelled: %s", name, path).WithCause(err)
	}
	cause := errors.Join(ErrUnreachable, err)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		cause = errors.Join(ErrUnreachable, ErrNotSent, err)
	}
	return bay.Errorf(bay.CodeShipError, "%s request error: %s unreachable", name, path).WithCause(cause)
}
