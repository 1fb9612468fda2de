package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Version is the SDK version sent in the User-Agent header.
const Version = "0.1.0"

// Environment variables read by NewFromEnv. The SHIPYARD_* names win over the BAY_* ones.
const (
	EnvEndpoint       = "SHIPYARD_ENDPOINT"
	EnvToken          = "SHIPYARD_TOKEN"
	EnvBayEndpoint    = "BAY_ENDPOINT"
	EnvBayToken       = "BAY_TOKEN"
	DefaultEndpoint   = "http://127.0.0.1:8114"
	DefaultMaxRetries = 3
	DefaultTimeout    = 30 * time.Second
)

// Client talks to one bay over its public HTTP API v1. It is safe for concurrent use.
//
// Retry policy: a request is retried (at most MaxRetries times, backoff min(0.2·2^n, 1.5) s with
// jitter) on transport errors and on HTTP 429, 502, 503 and 504 only when repeating it is safe:
// GET, PUT and DELETE, and POST carrying an Idempotency-Key (create sandbox, create cargo and
// extend_ttl always carry one: the SDK generates it unless the caller passes its own, and reuses
// it on every attempt; browser exec and batch carry one only when the caller passes it). Other
// POSTs (python/shell exec, browser calls without a key, keepalive, stop, gc run) are never
// retried, with one exception: a 503 session_not_ready answer, which bay returns before
// anything ran, is retried after details.retry_after_ms. Uploads are retried only when their
// body can be replayed (an io.ReadSeeker).
type Client struct {
	base       *url.URL
	token      string
	owner      string
	userAgent  string
	hc         *http.Client
	maxRetries int
	backoff    func(attempt int) time.Duration
	timeout    time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its Timeout should be zero: the SDK bounds each JSON
// call itself and streams uploads, downloads and terminals without a deadline).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxRetries sets how many times a safe request is retried (default 3; 0 disables).
func WithMaxRetries(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.maxRetries = n
		}
	}
}

// WithBackoff replaces the delay before retry number attempt (0-based); the default is
// min(0.2·2^attempt, 1.5) s with jitter. A 503 session_not_ready's retry_after_ms wins over it.
func WithBackoff(f func(attempt int) time.Duration) Option { return func(c *Client) { c.backoff = f } }

// WithTimeout bounds each JSON request attempt (default 30 s; 0 = no bound). Exec calls get
// at least their execution timeout plus 15 s. Streams (upload, download, terminal) are bounded
// by the caller's context only.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithOwner sets the X-Owner header, honoured by a bay that allows anonymous access.
func WithOwner(owner string) Option { return func(c *Client) { c.owner = owner } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client for the bay at endpoint ("http://host:8114"; a bare "host:port" gets
// http://). token is the API key sent as "Authorization: Bearer <token>"; when it is empty no
// Authorization header is sent at all, as an anonymous bay expects.
func New(endpoint, token string, opts ...Option) (*Client, error) {
	endpoint = strings.TrimSpace(endpoint)
	if endpoint == "" {
		return nil, errors.New("sdk: empty bay endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("sdk: parse endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("sdk: endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("sdk: endpoint %q has no host", endpoint)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		base:       u,
		token:      strings.TrimSpace(token),
		userAgent:  "shipyard-go-sdk/" + Version,
		hc:         &http.Client{},
		maxRetries: DefaultMaxRetries,
		backoff:    DefaultBackoff,
		timeout:    DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.backoff == nil {
		c.backoff = DefaultBackoff
	}
	return c, nil
}

// NewFromEnv builds a client from SHIPYARD_ENDPOINT / SHIPYARD_TOKEN, falling back to
// BAY_ENDPOINT / BAY_TOKEN, and to http://127.0.0.1:8114 without a token.
func NewFromEnv(opts ...Option) (*Client, error) {
	return New(EndpointFromEnv(), TokenFromEnv(), opts...)
}

// EndpointFromEnv returns the endpoint NewFromEnv would use.
func EndpointFromEnv() string {
	if v := os.Getenv(EnvEndpoint); v != "" {
		return v
	}
	if v := os.Getenv(EnvBayEndpoint); v != "" {
		return v
	}
	return DefaultEndpoint
}

// TokenFromEnv returns the token NewFromEnv would use ("" = anonymous).
func TokenFromEnv() string {
	if v := os.Getenv(EnvToken); v != "" {
		return v
	}
	return os.Getenv(EnvBayToken)
}

// Endpoint returns the bay base URL.
func (c *Client) Endpoint() string { return c.base.String() }

// DefaultBackoff is min(0.2·2^attempt, 1.5) seconds with "equal jitter": a uniformly random
// delay in [d/2, d].
func DefaultBackoff(attempt int) time.Duration {
	d := 200 * time.Millisecond
	for i := 0; i < attempt && d < 1500*time.Millisecond; i++ {
		d *= 2
	}
	d = min(d, 1500*time.Millisecond)
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}

// NewIdempotencyKey returns a random key matching bay's ^[A-Za-z0-9_-]{1,128}$.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "sdk-" + hex.EncodeToString(b[:])
}

// CallOption adjusts one call.
type CallOption func(*callOptions)

type callOptions struct {
	idemKey   string
	requestID string
}

// WithIdempotencyKey sets the Idempotency-Key of create sandbox, create cargo or extend_ttl
// (otherwise the SDK generates one per call, reused on retries). On a browser call it makes
// the call retryable; see Client.ExecBrowser.
func WithIdempotencyKey(key string) CallOption { return func(o *callOptions) { o.idemKey = key } }

// WithRequestID sets the X-Request-Id header bay echoes in logs and errors.
func WithRequestID(id string) CallOption { return func(o *callOptions) { o.requestID = id } }

func applyCallOptions(opts []CallOption) callOptions {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// request describes one logical API call (possibly several HTTP attempts).
type request struct {
	method string
	path   string
	query  url.Values
	// jsonBody, when non-nil, is marshalled once and replayed on every attempt.
	jsonBody any
	// body, when non-nil, produces the body of an attempt; replayable says whether it may be
	// called more than once.
	body          func() (io.Reader, error)
	replayable    bool
	contentLength int64 // -1 = unknown (chunked); only with body
	contentType   string
	header        http.Header
	idemKey       string
	requestID     string
	// timeout bounds one attempt including reading a JSON response; 0 = none.
	timeout time.Duration
	// stream: the caller consumes resp.Body; no per-attempt timeout is applied.
	stream bool
}

func (r *request) retrySafe() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return r.body == nil || r.replayable
	case http.MethodPost:
		if r.body != nil {
			return r.replayable
		}
		return r.idemKey != ""
	}
	return false
}

// response is a successful answer; release must be called once the body is consumed.
type response struct {
	*http.Response
	release func()
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// send performs r with the retry policy and returns the first 2xx response.
func (c *Client) send(ctx context.Context, r *request) (*response, error) {
	var payload []byte
	if r.jsonBody != nil {
		b, err := json.Marshal(r.jsonBody)
		if err != nil {
			return nil, fmt.Errorf("sdk: encode %s %s body: %w", r.method, r.path, err)
		}
		payload = b
	}
	safe := r.retrySafe()
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, r, payload)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || attempt >= c.maxRetries {
			return nil, err
		}
		delay, ok := c.retryDelay(err, safe, attempt)
		if !ok {
			return nil, err
		}
		if r.body != nil && !r.replayable {
			return nil, err
		}
		if serr := sleepCtx(ctx, delay); serr != nil {
			return nil, err
		}
	}
}

// retryDelay decides whether err may be retried and after how long.
func (c *Client) retryDelay(err error, safe bool, attempt int) (time.Duration, bool) {
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		// transport error (connection refused, reset, timeout of an attempt)
		return c.backoff(attempt), safe
	}
	if apiErr.Code == bayapi.CodeSessionNotReady {
		// Bay answers session_not_ready before it runs anything: safe for every request.
		if ms := apiErr.RetryAfterMS(); ms > 0 {
			return time.Duration(ms) * time.Millisecond, true
		}
		return c.backoff(attempt), true
	}
	if !safe {
		return 0, false
	}
	switch apiErr.Status {
	case http.StatusTooManyRequests:
		if ra, ok := apiErr.Details["retry_after_seconds"].(float64); ok && ra > 0 {
			return time.Duration(ra * float64(time.Second)), true
		}
		return c.backoff(attempt), true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return c.backoff(attempt), true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt performs one HTTP exchange. A non-2xx answer becomes an *Error (the Retry-After
// header of a 429 is kept in Details["retry_after_seconds"]).
func (c *Client) attempt(ctx context.Context, r *request, payload []byte) (*response, error) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if r.timeout > 0 && !r.stream {
		actx, cancel = context.WithTimeout(ctx, r.timeout)
	}
	var body io.Reader
	contentLength := int64(-1)
	switch {
	case payload != nil:
		body = bytes.NewReader(payload)
		contentLength = int64(len(payload))
	case r.body != nil:
		b, err := r.body()
		if err != nil {
			cancel()
			return nil, err
		}
		body = b
		contentLength = r.contentLength
	}
	req, err := http.NewRequestWithContext(actx, r.method, c.url(r.path, r.query), body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sdk: build %s %s: %w", r.method, r.path, err)
	}
	if body != nil {
		if contentLength >= 0 {
			req.ContentLength = contentLength
		} else {
			req.ContentLength = -1
		}
		if contentLength == 0 {
			req.Body = http.NoBody
		}
	}
	c.setHeaders(req.Header)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.idemKey != "" {
		req.Header.Set(bayapi.HeaderIdempotencyKey, r.idemKey)
	}
	if r.requestID != "" {
		req.Header.Set(bayapi.HeaderRequestID, r.requestID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sdk: %s %s: %w", r.method, r.path, ctx.Err())
		}
		return nil, fmt.Errorf("sdk: %s %s: %w", r.method, r.path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &response{Response: resp, release: func() { resp.Body.Close(); cancel() }}, nil
	}
	defer cancel()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	apiErr := decodeError(resp.StatusCode, resp.Header.Get(bayapi.HeaderRequestID), raw)
	if resp.StatusCode == http.StatusTooManyRequests {
		if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && s > 0 {
			if apiErr.Details == nil {
				apiErr.Details = map[string]any{}
			}
			if _, ok := apiErr.Details["retry_after_seconds"]; !ok {
				apiErr.Details["retry_after_seconds"] = s
			}
		}
	}
	return nil, apiErr
}

func (c *Client) setHeaders(h http.Header) {
	h.Set("User-Agent", c.userAgent)
	h.Set("Accept", "application/json")
	if c.token != "" {
		h.Set(bayapi.HeaderAuthorization, bayapi.BearerPrefix+c.token)
	}
	if c.owner != "" {
		h.Set(bayapi.HeaderOwner, c.owner)
	}
}

// doJSON performs r and decodes a JSON answer into out (nil: the body is discarded, e.g. 204).
func (c *Client) doJSON(ctx context.Context, r *request, out any) error {
	if r.timeout == 0 {
		r.timeout = c.timeout
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.release()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("sdk: decode %s %s response: %w", r.method, r.path, err)
	}
	return nil
}
