// Package logctx carries a request's identity (its request id and, once authenticated, its
// owner) in a context, and a slog.Handler that writes them on every record logged with that
// context: a line logged by any layer on behalf of a request (log.InfoContext(ctx, ...)) names
// the request without each call site repeating it.
package logctx

import (
	"context"
	"log/slog"
)

type key int

const (
	keyRequestID key = iota
	keyOwner
)

// Attribute names written by Handler.
const (
	AttrRequestID = "request_id"
	AttrOwner     = "owner"
)

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, keyRequestID, id)
}

// RequestID returns the request id ctx carries ("" if none).
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(keyRequestID).(string)
	return s
}

// WithOwner returns ctx carrying the authenticated owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, keyOwner, owner)
}

// Owner returns the authenticated owner ctx carries ("" if none).
func Owner(ctx context.Context) string {
	s, _ := ctx.Value(keyOwner).(string)
	return s
}

// Handler adds request_id and owner from the record's context to every record that does not
// already carry them. Records logged without a context (log.Info) pass unchanged.
type Handler struct {
	inner slog.Handler
	// has* are set when the handler's own attributes (WithAttrs) already name them.
	hasRequestID, hasOwner bool
}

// NewHandler wraps inner.
func NewHandler(inner slog.Handler) *Handler { return &Handler{inner: inner} }

// Wrap returns a logger whose records carry the request identity of their context.
func Wrap(log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(*Handler); ok {
		return log
	}
	return slog.New(NewHandler(log.Handler()))
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.inner.Handle(ctx, r)
	}
	id, owner := "", ""
	if !h.hasRequestID {
		id = RequestID(ctx)
	}
	if !h.hasOwner {
		owner = Owner(ctx)
	}
	if id == "" && owner == "" {
		return h.inner.Handle(ctx, r)
	}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case AttrRequestID:
			id = ""
		case AttrOwner:
			owner = ""
		}
		return id != "" || owner != ""
	})
	if id == "" && owner == "" {
		return h.inner.Handle(ctx, r)
	}
	r = r.Clone()
	if id != "" {
		r.AddAttrs(slog.String(AttrRequestID, id))
	}
	if owner != "" {
		r.AddAttrs(slog.String(AttrOwner, owner))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(as)
	for _, a := range as {
		c.hasRequestID = c.hasRequestID || a.Key == AttrRequestID
		c.hasOwner = c.hasOwner || a.Key == AttrOwner
	}
	return &c
}

// WithGroup implements slog.Handler. Inside a group the identity is still written at the top
// level of the record's own attributes, which the group then contains; that is acceptable for
// a log reader and keeps the handler simple.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}
