package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one API server. It is safe for concurrent use.
type Client struct {
	host *url.URL
	hc   *http.Client
}

// New returns a client of the API server cfg names; it does not contact it.
func New(cfg *Config) (*Client, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("api server address %q: want https://host:port", cfg.Host)
	}
	tr, err := cfg.Transport(false)
	if err != nil {
		return nil, err
	}
	return &Client{host: u, hc: &http.Client{Transport: tr}}, nil
}

// Host is the API server's base URL.
func (c *Client) Host() string { return c.host.String() }

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Pods of namespace ns.
func (c *Client) Pods(ns string) Resource[Pod, PodList] {
	return Resource[Pod, PodList]{c, "/api/v1/namespaces/" + ns + "/pods", "Pod", "v1"}
}

// Secrets of namespace ns.
func (c *Client) Secrets(ns string) Resource[Secret, SecretList] {
	return Resource[Secret, SecretList]{c, "/api/v1/namespaces/" + ns + "/secrets", "Secret", "v1"}
}

// ConfigMaps of namespace ns.
func (c *Client) ConfigMaps(ns string) Resource[ConfigMap, ConfigMapList] {
	return Resource[ConfigMap, ConfigMapList]{c, "/api/v1/namespaces/" + ns + "/configmaps", "ConfigMap", "v1"}
}

// PersistentVolumeClaims of namespace ns.
func (c *Client) PersistentVolumeClaims(ns string) Resource[PersistentVolumeClaim, PersistentVolumeClaimList] {
	return Resource[PersistentVolumeClaim, PersistentVolumeClaimList]{c, "/api/v1/namespaces/" + ns + "/persistentvolumeclaims", "PersistentVolumeClaim", "v1"}
}

// Services of namespace ns.
func (c *Client) Services(ns string) Resource[Service, ServiceList] {
	return Resource[Service, ServiceList]{c, "/api/v1/namespaces/" + ns + "/services", "Service", "v1"}
}

// NetworkPolicies of namespace ns.
func (c *Client) NetworkPolicies(ns string) Resource[NetworkPolicy, NetworkPolicyList] {
	return Resource[NetworkPolicy, NetworkPolicyList]{c, "/apis/networking.k8s.io/v1/namespaces/" + ns + "/networkpolicies", "NetworkPolicy", "networking.k8s.io/v1"}
}

// RuntimeClasses of the cluster (cluster-scoped; reading them needs a ClusterRole).
func (c *Client) RuntimeClasses() Resource[RuntimeClass, RuntimeClassList] {
	return Resource[RuntimeClass, RuntimeClassList]{c, "/apis/node.k8s.io/v1/runtimeclasses", "RuntimeClass", "node.k8s.io/v1"}
}

// Version is the API server's version (its /version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := c.do(ctx, http.MethodGet, "/version", nil, "", nil, &v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// LogOptions select a container's log.
type LogOptions struct {
	Container string
	Stream    string // LogStreamStdout, LogStreamStderr, or "" for both merged
}

// PodLogs streams the log of a container of Pod name in namespace ns; the caller closes it.
func (c *Client) PodLogs(ctx context.Context, ns, name string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	if o.Stream != "" {
		q.Set("stream", o.Stream)
	}
	resp, err := c.send(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+name+"/log", q, "", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ListOptions select the objects of a list or watch.
type ListOptions struct {
	LabelSelector   string
	FieldSelector   string
	ResourceVersion string
	Limit           int64
	// AllowWatchBookmarks lets the server send BOOKMARK events (a watch only).
	AllowWatchBookmarks bool
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	if o.ResourceVersion != "" {
		q.Set("resourceVersion", o.ResourceVersion)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	if o.AllowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	return q
}

// Patch types.
const (
	StrategicMergePatchType = "application/strategic-merge-patch+json"
	MergePatchType          = "application/merge-patch+json"
)

// Resource is one resource of a namespace: T is its object, L its list.
type Resource[T, L any] struct {
	c          *Client
	path       string
	kind       string
	apiVersion string
}

// Get reads the object called name.
func (r Resource[T, L]) Get(ctx context.Context, name string) (*T, error) {
	out := new(T)
	if err := r.c.do(ctx, http.MethodGet, r.path+"/"+name, nil, "", nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// List lists the objects o selects.
func (r Resource[T, L]) List(ctx context.Context, o ListOptions) (*L, error) {
	out := new(L)
	if err := r.c.do(ctx, http.MethodGet, r.path, o.query(), "", nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Create creates obj (its kind and API version are set here) and returns what the server
// stored.
func (r Resource[T, L]) Create(ctx context.Context, obj *T) (*T, error) {
	if o, ok := any(obj).(interface{ setType(apiVersion, kind string) }); ok {
		o.setType(r.apiVersion, r.kind)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", r.kind, err)
	}
	out := new(T)
	if err := r.c.do(ctx, http.MethodPost, r.path, nil, "application/json", b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Delete deletes the object called name; grace, when not nil, is a Pod's termination grace
// period in seconds.
func (r Resource[T, L]) Delete(ctx context.Context, name string, grace *int64) error {
	return r.del(ctx, name, deleteOptions{APIVersion: "v1", Kind: "DeleteOptions", GracePeriodSeconds: grace})
}

// DeleteUnchanged deletes the object called name only while its resource version is still
// resourceVersion; a change since (a write of another client) makes it fail with reason
// Conflict and leaves the object.
func (r Resource[T, L]) DeleteUnchanged(ctx context.Context, name, resourceVersion string) error {
	return r.del(ctx, name, deleteOptions{APIVersion: "v1", Kind: "DeleteOptions", Preconditions: &preconditions{ResourceVersion: resourceVersion}})
}

type deleteOptions struct {
	APIVersion         string         `json:"apiVersion"`
	Kind               string         `json:"kind"`
	GracePeriodSeconds *int64         `json:"gracePeriodSeconds,omitempty"`
	Preconditions      *preconditions `json:"preconditions,omitempty"`
}

type preconditions struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func (r Resource[T, L]) del(ctx context.Context, name string, opts deleteOptions) error {
	b, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	return r.c.do(ctx, http.MethodDelete, r.path+"/"+name, nil, "application/json", b, nil)
}

// Patch applies a patch of patchType to the object called name.
func (r Resource[T, L]) Patch(ctx context.Context, name, patchType string, patch []byte) (*T, error) {
	out := new(T)
	if err := r.c.do(ctx, http.MethodPatch, r.path+"/"+name, nil, patchType, patch, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch watches the objects o selects from o.ResourceVersion on; the caller stops it.
func (r Resource[T, L]) Watch(ctx context.Context, o ListOptions) (*Watch[T], error) {
	q := o.query()
	q.Set("watch", "true")
	resp, err := r.c.send(ctx, http.MethodGet, r.path, q, "", nil)
	if err != nil {
		return nil, err
	}
	return &Watch[T]{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// EventType is the kind of a watch event.
type EventType string

// The watch event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
	Error    EventType = "ERROR"
)

// Event is one event of a watch: the object as it is now (as it was last, for Deleted; only
// its resource version, for Bookmark), or for Error the status the server ended the watch
// with.
type Event[T any] struct {
	Type   EventType
	Object *T
	Err    *StatusError
}

// Watch is a stream of events.
type Watch[T any] struct {
	body io.ReadCloser
	dec  *json.Decoder
	err  error
}

// Events yields the events until the watch ends (Err says why) or the loop stops.
func (w *Watch[T]) Events() iter.Seq[Event[T]] {
	return func(yield func(Event[T]) bool) {
		for {
			ev, err := w.Next()
			if err != nil {
				w.err = err
				return
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// Err is why Events ended: io.EOF when the server ended the watch.
func (w *Watch[T]) Err() error { return w.err }

// Next returns the next event; io.EOF when the server ended the watch, the context's error
// when it ended.
func (w *Watch[T]) Next() (Event[T], error) {
	var raw struct {
		Type   EventType       `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.dec.Decode(&raw); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF // the connection ended in the middle of an event
		}
		return Event[T]{}, err
	}
	ev := Event[T]{Type: raw.Type}
	if raw.Type == Error {
		var st status
		if err := json.Unmarshal(raw.Object, &st); err != nil {
			return Event[T]{}, fmt.Errorf("watch: decode error event: %w", err)
		}
		ev.Err = st.err(0, "")
		return ev, nil
	}
	ev.Object = new(T)
	if err := json.Unmarshal(raw.Object, ev.Object); err != nil {
		return Event[T]{}, fmt.Errorf("watch: decode %s event: %w", raw.Type, err)
	}
	return ev, nil
}

// Stop ends the watch.
func (w *Watch[T]) Stop() { w.body.Close() }

// do sends a request and decodes a successful answer into out (nil: discards it).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, contentType string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, q, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// maxRetries bounds the retries of a request the server turned away before processing it.
const maxRetries = 5

// send sends a request and returns the response of a 2xx answer, else the server's status as
// a *StatusError. An answer 429 (the server's priority and fairness), or 5xx with
// Retry-After, is retried after the delay the server asks for (at most 10 s each).
func (c *Client) send(ctx context.Context, method, path string, q url.Values, contentType string, body []byte) (*http.Response, error) {
	u := *c.host
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = q.Encode()
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json, */*")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		serr := readStatus(resp, method)
		retryAfter := resp.Header.Get("Retry-After")
		if attempt < maxRetries && (resp.StatusCode == http.StatusTooManyRequests || (resp.StatusCode >= 500 && retryAfter != "")) {
			delay := time.Second
			if s, err := strconv.Atoi(retryAfter); err == nil && s >= 0 {
				delay = min(time.Duration(s)*time.Second, 10*time.Second)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		return nil, serr
	}
}

// status is the API's Status object (the body of an error answer).
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (s status) err(code int, method string) *StatusError {
	e := &StatusError{Code: s.Code, Reason: s.Reason, Message: s.Message}
	if e.Code == 0 {
		e.Code = code
	}
	if e.Reason == "" {
		e.Reason = reasonFor(e.Code, method)
	}
	return e
}

// readStatus reads an error answer (and closes its body).
func readStatus(resp *http.Response, method string) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var s status
	if json.Unmarshal(b, &s) == nil && s.Kind == "Status" {
		return s.err(resp.StatusCode, method)
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return status{Message: fmt.Sprintf("the server answered %d: %s", resp.StatusCode, msg)}.err(resp.StatusCode, method)
}

// The reasons of a Status the driver tells apart.
const (
	ReasonNotFound           = "NotFound"
	ReasonAlreadyExists      = "AlreadyExists"
	ReasonConflict           = "Conflict"
	ReasonInvalid            = "Invalid"
	ReasonBadRequest         = "BadRequest"
	ReasonServiceUnavailable = "ServiceUnavailable"
	ReasonGone               = "Gone"
	ReasonExpired            = "Expired"
)

// reasonFor is the reason of an answer without a Status, by its code.
func reasonFor(code int, method string) string {
	switch code {
	case http.StatusNotFound:
		return ReasonNotFound
	case http.StatusConflict:
		if method == http.MethodPost {
			return ReasonAlreadyExists
		}
		return ReasonConflict
	case http.StatusUnprocessableEntity:
		return ReasonInvalid
	case http.StatusBadRequest:
		return ReasonBadRequest
	case http.StatusServiceUnavailable:
		return ReasonServiceUnavailable
	case http.StatusGone:
		return ReasonGone
	}
	return ""
}

// StatusError is an error answer of the API server.
type StatusError struct {
	Code    int    // the HTTP status
	Reason  string // the Status's reason: NotFound, AlreadyExists, Conflict, Invalid, ...
	Message string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the server answered %d %s", e.Code, e.Reason)
}

// HasReason reports whether err is an answer of the API server with that reason.
func HasReason(err error, reason string) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Reason == reason
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return HasReason(err, ReasonNotFound) }

// IsAlreadyExists reports whether err says an object of that name exists.
func IsAlreadyExists(err error) bool { return HasReason(err, ReasonAlreadyExists) }
