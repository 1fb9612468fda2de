package egressgw

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The admin port: GET /readyz (no token: the readiness probe; 200 once the first list of
// sandbox Pods is registered), and with "Authorization: Bearer <token>":
//   - GET /v1/sandboxes/{id}/events: this Pod's refusals for the sandbox (Events);
//   - GET /v1/pods/{name}: the version of the policy this Pod applied for a sandbox Pod
//     (PodStatus; "" when it knows none), so that bay can wait until a new Pod or a changed
//     policy is in force;
//   - GET /metrics: the refusal and DNS counters in Prometheus' text format (Config.Metrics).

// Events is the answer of the events call.
type Events struct {
	Events []Event `json:"events"`
	Denied int64   `json:"denied"`
}

// Event is one refusal.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Host string    `json:"host,omitempty"`
	Port int       `json:"port,omitempty"`
	Rule string    `json:"rule"`
}

// PodStatus is the answer of the Pod call.
type PodStatus struct {
	Version string `json:"version"`
}

func (g *Gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.ready.Load() {
			http.Error(w, "not synced with the sandbox Pods yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/events", g.authed(func(w http.ResponseWriter, r *http.Request) {
		evs, denied := g.svc.Events(r.PathValue("id"))
		out := Events{Events: make([]Event, 0, len(evs)), Denied: denied}
		for _, e := range evs {
			out.Events = append(out.Events, Event{Time: e.Time, Kind: e.Kind, Host: e.Host, Port: e.Port, Rule: e.Rule})
		}
		writeJSON(w, out)
	}))
	mux.HandleFunc("GET /v1/pods/{name}", g.authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, PodStatus{Version: g.status(r.PathValue("name"))})
	}))
	if g.cfg.Metrics != nil {
		mux.HandleFunc("GET /metrics", g.authed(g.cfg.Metrics.ServeHTTP))
	}
	return mux
}

func (g *Gateway) authed(h http.HandlerFunc) http.HandlerFunc {
	want := []byte("Bearer " + g.cfg.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Client calls gateway Pods' admin ports.
type Client struct {
	Token string
	HTTP  *http.Client
}

// NewClient returns a client with token and a bounded timeout.
func NewClient(token string) *Client {
	return &Client{Token: token, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

// Events asks the gateway Pod at addr (host:port) for the sandbox's refusals.
func (c *Client) Events(ctx context.Context, addr, sandboxID string) ([]bay.NetworkEvent, int64, error) {
	var out Events
	if err := c.get(ctx, addr, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/events", &out); err != nil {
		return nil, 0, err
	}
	evs := make([]bay.NetworkEvent, 0, len(out.Events))
	for _, e := range out.Events {
		evs = append(evs, bay.NetworkEvent{Time: e.Time, Kind: e.Kind, Host: e.Host, Port: e.Port, Rule: e.Rule})
	}
	return evs, out.Denied, nil
}

// PodVersion asks the gateway Pod at addr which policy version it applied for Pod name.
func (c *Client) PodVersion(ctx context.Context, addr, name string) (string, error) {
	var out PodStatus
	if err := c.get(ctx, addr, "/v1/pods/"+url.PathEscape(name), &out); err != nil {
		return "", err
	}
	return out.Version, nil
}

func (c *Client) get(ctx context.Context, addr, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("egress gateway %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("egress gateway %s: %s: %s", addr, resp.Status, b)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
		return fmt.Errorf("egress gateway %s: %w", addr, err)
	}
	return nil
}
