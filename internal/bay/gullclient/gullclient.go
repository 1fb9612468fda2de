// Package gullclient is bay's HTTP client of the Gull browser runtime (api/gullapi): the
// runtime-neutral part (health that waits for the browser, description, cache) and the browser
// calls. Every call is bounded by its own timeout on top of the caller's context. Failures are
// classified *bay.Error values: a call that never reached gull carries runtime.ErrUnreachable
// and runtime.ErrNotSent, an answer of gull's own is ship_error (502) with its safe detail, a
// 422 of gull's (a request bay should not have sent) is validation_error.
package gullclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
)

// Per-call timeouts; exec calls get the request's timeout plus these graces.
const (
	HealthTimeout = 2 * time.Second
	MetaTimeout   = 5 * time.Second
	ExecGrace     = 5 * time.Second
	BatchGrace    = 10 * time.Second
	metaCacheTTL  = 5 * time.Minute
	maxErrorBody  = 64 << 10
)

// Client calls Gull runtimes; one serves every sandbox. Safe for concurrent use.
type Client struct {
	hc  *http.Client
	log *slog.Logger

	mu   sync.Mutex
	meta map[string]metaEntry // endpoint without credentials -> description
}

type metaEntry struct {
	meta runtime.Meta
	at   time.Time
}

var _ runtime.Client = (*Client)(nil)

// New returns a client using hc (a pooled client without proxy when nil).
func New(hc *http.Client, log *slog.Logger) *Client {
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     30 * time.Second,
		}}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{hc: hc, log: log.With("component", "gullclient"), meta: map[string]metaEntry{}}
}

// Health returns nil once gull answers healthy with its browser ready: a gull whose Chromium
// is still starting (or restarting) cannot serve browser calls yet.
func (c *Client) Health(ctx context.Context, endpoint string) error {
	var h gullapi.HealthResponse
	if err := c.do(ctx, endpoint, http.MethodGet, gullapi.PathHealth, nil, &h, HealthTimeout); err != nil {
		return err
	}
	if h.Status != gullapi.StatusHealthy || !h.BrowserReady {
		return fmt.Errorf("gull not ready: status %s, browser ready %v", h.Status, h.BrowserReady)
	}
	return nil
}

// Describe returns gull's /meta as a runtime description, cached per endpoint.
func (c *Client) Describe(ctx context.Context, endpoint string) (runtime.Meta, error) {
	key := cacheKey(endpoint)
	c.mu.Lock()
	if e, ok := c.meta[key]; ok && time.Since(e.at) < metaCacheTTL {
		c.mu.Unlock()
		return e.meta, nil
	}
	c.mu.Unlock()
	var m gullapi.MetaResponse
	if err := c.do(ctx, endpoint, http.MethodGet, gullapi.PathMeta, nil, &m, MetaTimeout); err != nil {
		return runtime.Meta{}, err
	}
	out := runtime.Meta{Name: m.Runtime.Name, Version: m.Runtime.Version, Capabilities: slices.Sorted(maps.Keys(m.Capabilities))}
	c.mu.Lock()
	if len(c.meta) > 1024 {
		clear(c.meta)
	}
	c.meta[key] = metaEntry{meta: out, at: time.Now()}
	c.mu.Unlock()
	return out, nil
}

// ForgetEndpoint drops what is cached for an endpoint.
func (c *Client) ForgetEndpoint(endpoint string) {
	c.mu.Lock()
	delete(c.meta, cacheKey(endpoint))
	c.mu.Unlock()
}

// Exec runs one browser command; timeout is the command's (seconds).
func (c *Client) Exec(ctx context.Context, endpoint, cmd string, timeout int) (*gullapi.ExecResponse, error) {
	var out gullapi.ExecResponse
	req := gullapi.ExecRequest{Cmd: &cmd, Timeout: &timeout}
	if err := c.do(ctx, endpoint, http.MethodPost, gullapi.PathExec, req, &out, time.Duration(timeout)*time.Second+ExecGrace); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecBatch runs commands in order within one overall budget of timeout seconds.
func (c *Client) ExecBatch(ctx context.Context, endpoint string, commands []string, timeout int, stopOnError bool) (*gullapi.ExecBatchResponse, error) {
	var out gullapi.ExecBatchResponse
	req := gullapi.ExecBatchRequest{Commands: commands, Timeout: &timeout, StopOnError: &stopOnError}
	if err := c.do(ctx, endpoint, http.MethodPost, gullapi.PathExecBatch, req, &out, time.Duration(timeout)*time.Second+BatchGrace); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends body as JSON (nil = none) and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, endpoint, method, path string, body, out any, timeout time.Duration) error {
	return runtime.DoJSON(ctx, c.hc, "Gull", endpoint, method, path, body, out, timeout, func(resp *http.Response) error {
		return statusError(resp, path)
	})
}

func statusError(resp *http.Response, path string) error {
	var er gullapi.ErrorResponse
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if json.Unmarshal(raw, &er) != nil || er.Detail == "" {
		er.Detail = http.StatusText(resp.StatusCode)
	}
	cause := fmt.Errorf("gull %s answered %d: %s", path, resp.StatusCode, er.Detail)
	if resp.StatusCode == http.StatusUnprocessableEntity || resp.StatusCode == http.StatusRequestEntityTooLarge {
		return bay.Errorf(bay.CodeValidation, "%s", er.Detail).WithCause(cause)
	}
	d := map[string]any{"gull_status": resp.StatusCode}
	if er.Code != "" {
		d["gull_code"] = er.Code
	}
	return bay.Errorf(bay.CodeShipError, "Gull request failed: %d: %s", resp.StatusCode, er.Detail).WithDetails(d).WithCause(cause)
}

// cacheKey is an endpoint without its user info.
func cacheKey(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		return endpoint
	}
	u.User = nil
	return u.String()
}
