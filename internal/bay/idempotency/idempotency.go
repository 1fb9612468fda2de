// Package idempotency implements Idempotency-Key handling for bay's create and extend
// endpoints:
//
//   - a key is scoped to owner + method + path (the same key on another endpoint or another
//     sandbox's extend_ttl is a different key);
//   - a key of the wrong format is 400 validation_error (the reference said 409);
//   - the same key with another canonical body is 409 conflict with details {key, hint};
//   - concurrent duplicates execute once: an in-process lock per (owner, scope, key) serialises
//     them, and the record is written in the same store transaction as the effect (the service
//     calls the hook inside its Tx), so the second caller replays the first one's response;
//     across instances, a PutIdempotency conflict aborts the loser's transaction (its effect is
//     discarded) and the winner's record is replayed;
//   - errors are never recorded (a failed request can be retried with the same key);
//   - a replay returns the stored status and body byte for byte;
//   - expired records are swept by Run.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Config configures the manager.
type Config struct {
	Enabled bool
	TTL     time.Duration // record lifetime (default 1 h)
	// SweepInterval is the period of Run's expired-record sweep (default 5 min).
	SweepInterval time.Duration
}

// Hook is what the effect calls inside its store transaction with the response it will
// return; it writes the record. httpapi adapts it to a service's bay.TxHook, rendering the
// service's result into the response first.
type Hook = func(ctx context.Context, tx bay.Tx, resp any) error

// Request identifies one idempotent request.
type Request struct {
	Owner  string
	Key    string // the Idempotency-Key header; "" = none
	Method string
	Path   string // the request path (with ids filled in)
	// Body is the validated request with defaults filled, serialised canonically for the
	// fingerprint ({} and {"profile":"python-default"} are the same request).
	Body any
}

// Response is what the handler writes.
type Response struct {
	Status   int
	Body     []byte
	Replayed bool
}

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of bay's life.
var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`) // and at most 128 bytes

// ValidKey reports whether key has the accepted format: 1-128 of A-Z a-z 0-9 _ -.
func ValidKey(key string) bool { return len(key) <= 128 && keyRE.MatchString(key) }

// errLostRace marks a PutIdempotency conflict: another instance recorded the key first.
var errLostRace = errors.New("idempotency record written concurrently")

// Manager runs idempotent requests.
type Manager struct {
	store bay.Store
	clock bay.Clock
	cfg   Config
	log   *slog.Logger

	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // capacity 1: holding = a value in the channel
	refs int
}

// New returns a manager. clock nil = system clock.
func New(store bay.Store, clock bay.Clock, cfg Config, log *slog.Logger) *Manager {
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 5 * time.Minute
	}
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{store: store, clock: clock, cfg: cfg, log: log.With("component", "idempotency"), locks: map[string]*keyLock{}}
}

// Enabled reports whether keys are honoured at all (disabled: the header is ignored).
func (m *Manager) Enabled() bool { return m.cfg.Enabled }

// Do runs fn at most once per (owner, method+path, key) and returns the response to write:
// status with fn's result marshalled as JSON, or the stored response of an earlier identical
// request. fn must call hook (when non-nil) inside the transaction that makes its effect
// durable, with the value it returns.
func (m *Manager) Do(ctx context.Context, req Request, status int, fn func(ctx context.Context, hook Hook) (any, error)) (Response, error) {
	if !m.cfg.Enabled || req.Key == "" {
		v, err := fn(ctx, nil)
		if err != nil {
			return Response{}, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return Response{}, bay.Errorf(bay.CodeInternal, "Failed to encode response").WithCause(err)
		}
		return Response{Status: status, Body: b}, nil
	}
	if !ValidKey(req.Key) {
		return Response{}, bay.Errorf(bay.CodeValidation, "Invalid Idempotency-Key format: must be 1-128 alphanumeric characters, dash, or underscore").
			WithDetails(map[string]any{"key": req.Key})
	}
	canon, err := json.Marshal(req.Body)
	if err != nil {
		return Response{}, bay.Errorf(bay.CodeInternal, "Failed to encode request").WithCause(err)
	}
	sum := sha256.Sum256([]byte(req.Method + ":" + req.Path + ":" + string(canon)))
	fp := hex.EncodeToString(sum[:])
	scoped := req.Method + " " + req.Path + " " + req.Key

	unlock, err := m.lock(ctx, req.Owner+"\x00"+scoped)
	if err != nil {
		return Response{}, bay.Errorf(bay.CodeTimeout, "Request cancelled while waiting for a concurrent identical request").WithCause(err)
	}
	defer unlock()

	if resp, ok, err := m.lookup(ctx, req, scoped, fp); err != nil || ok {
		return resp, err
	}

	var body []byte
	hook := func(ctx context.Context, tx bay.Tx, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		now := m.clock.Now().UTC()
		rec := &bay.IdempotencyRecord{
			Owner: req.Owner, Key: scoped, Fingerprint: fp, StatusCode: status, Response: b,
			CreatedAt: now, ExpiresAt: now.Add(m.cfg.TTL),
		}
		if err := tx.PutIdempotency(ctx, rec); err != nil {
			if bay.IsConflict(err) {
				return fmt.Errorf("%w: %w", errLostRace, err)
			}
			return err
		}
		body = b
		return nil
	}
	v, err := fn(ctx, hook)
	if err != nil {
		if errors.Is(err, errLostRace) {
			// Another instance won: our effect was rolled back with our record.
			if resp, ok, lerr := m.lookup(ctx, req, scoped, fp); lerr != nil || ok {
				return resp, lerr
			}
		}
		return Response{}, err
	}
	if body == nil { // fn made no durable effect through the hook
		if body, err = json.Marshal(v); err != nil {
			return Response{}, bay.Errorf(bay.CodeInternal, "Failed to encode response").WithCause(err)
		}
	}
	return Response{Status: status, Body: body}, nil
}

// lookup returns the stored response of an unexpired record (ok), a 409 for a fingerprint
// mismatch, or ok=false when there is none.
func (m *Manager) lookup(ctx context.Context, req Request, scoped, fp string) (Response, bool, error) {
	rec, err := m.store.GetIdempotency(ctx, req.Owner, scoped)
	if err != nil {
		if bay.IsNotFound(err) {
			return Response{}, false, nil
		}
		return Response{}, false, bay.Errorf(bay.CodeInternal, "Failed to read idempotency record").WithCause(err)
	}
	if m.clock.Now().After(rec.ExpiresAt) {
		return Response{}, false, nil // replaced by PutIdempotency
	}
	if rec.Fingerprint != fp {
		return Response{}, false, bay.Errorf(bay.CodeConflict, "Idempotency key already used with different request parameters").
			WithDetails(map[string]any{"key": req.Key, "hint": "Use a different Idempotency-Key for different request parameters"})
	}
	return Response{Status: rec.StatusCode, Body: rec.Response, Replayed: true}, true, nil
}

// lock takes the per-key lock, waiting for ctx at most.
func (m *Manager) lock(ctx context.Context, k string) (func(), error) {
	m.mu.Lock()
	l := m.locks[k]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		m.locks[k] = l
	}
	l.refs++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(m.locks, k)
		}
		m.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// Sweep deletes expired records and returns how many.
func (m *Manager) Sweep(ctx context.Context) (int, error) {
	var n int
	err := m.store.Tx(ctx, func(tx bay.Tx) error {
		var err error
		n, err = tx.DeleteExpiredIdempotency(ctx, m.clock.Now().UTC())
		return err
	})
	return n, err
}

// Run sweeps expired records every SweepInterval until ctx ends. It returns nil on
// cancellation; sweep errors are logged and the loop continues.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			n, err := m.Sweep(sctx)
			cancel()
			if err != nil {
				m.log.ErrorContext(ctx, "sweep expired idempotency records", "err", err)
			} else if n > 0 {
				m.log.InfoContext(ctx, "swept expired idempotency records", "count", n)
			}
		}
	}
}
