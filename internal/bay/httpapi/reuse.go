package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/reuse"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of bay's life.
var reuseKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`) // and at most 128 bytes

// createReused answers POST /v1/sandboxes with reuse: the owner's sandbox of the key (200,
// Shipyard-Reused: true), or a new one (201).
func (s *Server) createReused(w http.ResponseWriter, r *http.Request, owner string, p sandbox.CreateParams, spec *bayapi.ReuseSpec) {
	rc := s.opts.Reuse
	if rc.Disabled {
		s.fail(w, r, bay.Errorf(bay.CodeValidation, "Sandbox reuse is disabled on this server (reuse.reuse_mode)"))
		return
	}
	var is issues
	if len(spec.Key) > 128 || !reuseKeyRE.MatchString(spec.Key) {
		is.add("value_error", []any{"body", "reuse", "key"}, "Value error, 1-128 characters of A-Z a-z 0-9 _ - : .", spec.Key, nil)
	}
	pol := rc.Defaults
	for _, f := range []struct {
		v    *bayapi.Int
		name string
		d    *time.Duration
	}{{spec.IdleTTL, "idle_ttl", &pol.IdleTTL}, {spec.HardTTL, "hard_ttl", &pol.HardTTL}} {
		if f.v != nil {
			is.intRange(int64(*f.v), 1, bayapi.MaxTTL, "body", "reuse", f.name)
			*f.d = time.Duration(*f.v) * time.Second
		}
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	if p.TTL == nil && pol.HardTTL > 0 {
		v := int64(pol.HardTTL.Seconds())
		p.TTL = &v
	}
	ctx := r.Context()
	timeout := rc.LockTimeout
	if timeout <= 0 {
		timeout = 600 * time.Second
	}
	unlock, err := reuse.Lock(ctx, s.svc.Store(), owner, spec.Key, time.Now, timeout, s.log)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer unlock()
	id, created, err := reuse.Resolve(ctx, s.svc.Store(), owner, spec.Key, pol, time.Now,
		func(ctx context.Context, hook reuse.Hook) (*bay.SandboxView, error) {
			return s.svc.CreateSandbox(ctx, owner, p, hook)
		},
		func(ctx context.Context, id string) error { return s.svc.DeleteSandbox(ctx, owner, id) }, s.log)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.GetSandbox(ctx, owner, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
		w.Header().Set(bayapi.HeaderReused, "true")
	}
	writeJSON(w, status, renderSandbox(out))
}
