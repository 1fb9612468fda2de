package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// NetworkEvent is one connection or DNS query a sandbox's network policy refused.
type NetworkEvent struct {
	Time time.Time
	Kind string // dns | http | tls | tcp | udp
	Host string // the name asked for, or the address when there was none
	Port int
	Rule string // why: "not in allow list", "deny secret.example.com", "blocked address ..."
}

// NetworkEvents is the newest refusals of a sandbox, oldest first (bay keeps a bounded ring).
type NetworkEvents struct {
	Items []NetworkEvent
	// Denied counts every refusal since the sandbox's compute started, also those the ring no
	// longer holds.
	Denied int64
}

func networkEventsFromWire(w *bayapi.NetworkEventList) NetworkEvents {
	return NetworkEvents{Denied: w.Denied, Items: convert(w.Items, func(e *bayapi.NetworkEvent) NetworkEvent {
		return NetworkEvent{Time: e.Time.Time, Kind: e.Kind, Host: e.Host, Port: e.Port, Rule: e.Rule}
	})}
}

// UnmarshalJSON reads bay's event list.
func (n *NetworkEvents) UnmarshalJSON(b []byte) error { return decodeAs(b, n, networkEventsFromWire) }

// MarshalJSON renders the events as bay's event list.
func (n NetworkEvents) MarshalJSON() ([]byte, error) {
	w := bayapi.NetworkEventList{Denied: n.Denied, Items: make([]bayapi.NetworkEvent, 0, len(n.Items))}
	for _, e := range n.Items {
		w.Items = append(w.Items, bayapi.NetworkEvent{Time: wtime(e.Time), Kind: e.Kind, Host: e.Host, Port: e.Port, Rule: e.Rule})
	}
	return json.Marshal(w)
}

// SetNetwork calls PATCH /v1/sandboxes/{id}/network: the sandbox's policy becomes p, which
// may only tighten its profile's (Allow nil: the profile's list). A change within the
// allowlist applies to the running compute in place (open connections it no longer allows
// are closed); a change of mode restarts the compute (the workspace is kept). It returns the
// sandbox with its effective policy. Errors: validation_error (a loosening, a bad entry),
// not_found, capability_not_supported (a policy the driver cannot enforce).
func (c *Client) SetNetwork(ctx context.Context, id string, p NetworkPolicy) (*Sandbox, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	var out Sandbox
	if err := c.doJSON(ctx, &request{method: http.MethodPatch, path: sbPath(bayapi.PathNetwork, id), jsonBody: bayapi.NetworkPolicy(p)}, &out); err != nil {
		return nil, err
	}
	return c.sandbox(&out), nil
}

// NetworkEvents calls GET /v1/sandboxes/{id}/network/events: the newest refused connections
// and DNS queries of the sandbox.
func (c *Client) NetworkEvents(ctx context.Context, id string) (*NetworkEvents, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	var out NetworkEvents
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathNetworkEvents, id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetNetwork see Client.SetNetwork; s is updated with the answer.
func (s *Sandbox) SetNetwork(ctx context.Context, p NetworkPolicy) error {
	n, err := s.c.SetNetwork(ctx, s.ID, p)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// NetworkEvents see Client.NetworkEvents.
func (s *Sandbox) NetworkEvents(ctx context.Context) (*NetworkEvents, error) {
	return s.c.NetworkEvents(ctx, s.ID)
}
