// Package runtime is what bay needs of every runtime type that runs inside a sandbox (ship for
// code, gull for the browser): readiness, a self-description, and forgetting what is cached for
// an endpoint that went away. Capability routing, readiness waits and the sandbox detail are
// written against Client and never ask which runtime they talk to; the capability calls
// themselves (python, shell, files, browser) live on each runtime's own client.
package runtime

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnreachable marks a call that could not reach a runtime (connection refused or reset, no
// answer): the caller re-checks the container instead of trusting a cached probe.
var ErrUnreachable = errors.New("runtime unreachable")

// ErrNotSent marks a call whose request never reached the runtime (the connection could not
// be opened): it had no effect there, so it may be sent again to a replacement.
var ErrNotSent = errors.New("request not sent")

// ErrForeign marks a runtime's refusal of the session's token: whoever answers at the endpoint
// is not the session's runtime (an address freed by a dead container and given to another
// sandbox's), so waiting for it longer is pointless.
var ErrForeign = errors.New("another runtime answers at this address")

// Meta is a runtime's self-description.
type Meta struct {
	Name    string // "ship", "gull"
	Version string
	// Capabilities the runtime serves ("python", "shell", "filesystem", "browser"); empty when
	// the runtime does not say, which callers take as "do not refuse".
	Capabilities []string
}

// Has reports whether the runtime declares capability.
func (m Meta) Has(capability string) bool {
	for _, c := range m.Capabilities {
		if c == capability {
			return true
		}
	}
	return false
}

// Client talks to one runtime type. Endpoints are base URLs that carry the session's runtime
// token as their user info (bay.Session.AuthorizedURL) where the call needs it.
type Client interface {
	// Health returns nil once the runtime at endpoint can serve calls.
	Health(ctx context.Context, endpoint string) error
	// Describe returns the runtime's self-description (cached per endpoint).
	Describe(ctx context.Context, endpoint string) (Meta, error)
	// ForgetEndpoint drops what is cached for endpoint (its container is gone).
	ForgetEndpoint(endpoint string)
}

// Clients are the runtime clients by runtime type.
type Clients map[string]Client

// For returns the client of runtimeType.
func (c Clients) For(runtimeType string) (Client, error) {
	if cl, ok := c[runtimeType]; ok {
		return cl, nil
	}
	return nil, fmt.Errorf("no client for runtime type %q", runtimeType)
}
