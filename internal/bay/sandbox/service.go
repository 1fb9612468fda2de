// Package sandbox is bay's lifecycle service: sandboxes, their sessions (the driver instances
// that run them), stop, TTL, keepalive and the reclaims the GC and the warm pool ask for. It is
// the only code that sequences session and sandbox Store writes with Driver calls; the
// capability service (internal/bay/capability) asks it for a running session and reports
// runtimes it found dead, and managed cargos are created and removed through the cargo service
// (internal/bay/cargo). It answers domain values (bay.SandboxView, bay.Page); the HTTP layer
// renders them.
//
// Concurrency model:
//   - Each Store.Tx is serialised and re-reads what it changes, so a read-check-write inside
//     one Tx is atomic (also across several bay instances sharing the database).
//   - Starting a session is deduplicated per sandbox in-process (a keyed single flight: any
//     number of concurrent first calls start exactly one container) and across instances by
//     the database: a session in state "starting" that belongs to another live instance makes
//     callers wait (503 session_not_ready, retry_after_ms 1000); one older than the readiness
//     bound plus a margin is a crash leftover and is destroyed and rebuilt.
//   - Stop and delete never wait for a start in progress: they delete the session rows first
//     and remove the containers; a starter that finds its row gone removes what it created.
//
// Lifecycle choices:
//   - Create is lazy: no container; a managed cargo's volume is created (with its labels) right
//     before the first container (Config.EagerVolume restores create-time volumes).
//   - A session is one driver instance: every container of the profile, created and started
//     all-or-nothing by the driver, each runtime waited for by its own client; a dead container
//     of any kind makes the session dead and it is rebuilt on the next call. The driver
//     returns once the containers it starts first run (gull's, whose Chromium is the slowest
//     to become ready) and starts the others in the background once those runtimes are ready
//     (so that no container start competes with Chromium's launch); a call waits only for the
//     container that serves it (EnsureSessionFor), while the session stays "starting" until
//     every container is ready, and fails and is undone as a whole if one of them fails.
//   - Stop removes containers (not just stops them) and deletes the session rows; files stay.
//   - Expired sandboxes get no session (409 sandbox_expired), so every capability call on one
//     is refused at once.
//   - The liveness probe (instance inspect) of a running session is cached for ProbeCacheTTL and
//     dropped when a call could not reach the runtime.
//
// Every error returned is a classified *bay.Error (or wraps one); messages are safe for
// clients and causes are logged.
package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/cargo"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// Config holds the service's settings; zero values take the defaults noted.
type Config struct {
	// Profiles are the normalised profiles from configuration (config order).
	Profiles []bay.Profile
	// InstanceID is this bay's GC instance id, written as the bay.instance_id label.
	InstanceID string
	// Deployment is the database's deployment id, written as the bay.deployment label ("" =
	// none).
	Deployment string
	// ReadinessTimeout bounds the wait for a started runtime's /health (default 60 s).
	ReadinessTimeout time.Duration
	// StaleStartMargin is added to ReadinessTimeout to decide that a "starting" session of
	// another instance is a crash leftover (default 30 s).
	StaleStartMargin time.Duration
	// ProbeCacheTTL is how long a successful liveness probe (driver inspect) of a running
	// session is trusted (default 2 s).
	ProbeCacheTTL time.Duration
	// DefaultCargoSizeMB is the size_limit_mb of cargos created without one (default 1024).
	DefaultCargoSizeMB int
	// SkillsRoot is the host directory of skill folders; profile skills are mounted read-only
	// at /skills/<name>. "" = none.
	SkillsRoot string
	// EagerVolume creates a managed cargo's volume at create time. By default (false) it is
	// created right before the sandbox's first container (with the same labels), so that a
	// create is database work only: bench/lazycreate measured the Docker volume create as the
	// dominant cost of a create (p50 5.9 ms eager vs 0.9 ms lazy through the HTTP API, 4
	// clients). External cargos (POST /v1/cargos) always get their volume at once.
	EagerVolume bool
	// User is the container user (default "1000:1000").
	User string
	// StopTimeout bounds the removal of a session's containers (stop, delete, reclaims, failed
	// starts; default 60 s). A force removal takes well under a second on a normal engine, so
	// stop still answers within 5 s there; the bound is generous for a loaded engine (50
	// concurrent deletes made removals take more than 5 s), because a container given up on
	// keeps the managed cargo's volume in use.
	StopTimeout time.Duration
	// ImageBuilds are the profile images bay is building in the background
	// (images.build_missing): a create of a profile whose image is being built starts on the
	// image's stand-in, or is answered 503 unavailable while it has none. nil: none.
	ImageBuilds *bay.ImageBuilds
}

func (c *Config) applyDefaults() {
	if c.ReadinessTimeout <= 0 {
		c.ReadinessTimeout = 60 * time.Second
	}
	if c.StaleStartMargin <= 0 {
		c.StaleStartMargin = 30 * time.Second
	}
	if c.ProbeCacheTTL <= 0 {
		c.ProbeCacheTTL = 2 * time.Second
	}
	if c.DefaultCargoSizeMB <= 0 {
		c.DefaultCargoSizeMB = 1024
	}
	if c.User == "" {
		c.User = "1000:1000"
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 60 * time.Second
	}
	if c.InstanceID == "" {
		c.InstanceID = "bay"
	}
}

// Reasons of session and sandbox destruction that are not background reclaims (those are
// bay.Reason* of internal/bay/reclaim.go); all are logged.
const (
	ReasonStop   bay.Reason = "stop"
	ReasonDelete bay.Reason = "delete"
	ReasonDead   bay.Reason = "dead"
)

// WarmClaimer is the warm pool as seen by the create path. The service performs the claim
// itself (Tx.ClaimWarmSandbox, in the same transaction as the idempotency record); the pool
// only says whether a claim is worth trying and is told about claims to replenish.
type WarmClaimer interface {
	// WarmPoolEnabled reports whether profileID has a warm pool.
	WarmPoolEnabled(profileID string) bool
	// Claimed is called after a warm sandbox was handed to a caller.
	Claimed(ctx context.Context, sb *bay.Sandbox)
}

// Service is the lifecycle service. Create it with New.
type Service struct {
	store  bay.Store
	driver bay.Driver
	// cargos creates and deletes the volumes of managed cargos.
	cargos *cargo.Service
	// runtimes holds every runtime type's client for readiness, descriptions and health.
	runtimes runtime.Clients
	clock    bay.Clock
	log      *slog.Logger
	cfg      Config

	profiles map[string]*bay.Profile
	// bootID identifies this process on session rows: "<instance_id>/<random>".
	bootID string

	starts flightGroup
	// startsMu guards startCancels: the cancel of the start this process runs per sandbox id.
	startsMu     sync.Mutex
	startCancels map[string]context.CancelFunc

	probeMu sync.Mutex
	probed  map[string]time.Time // session id -> time of the last successful liveness probe

	warmMu sync.RWMutex
	warm   WarmClaimer

	skills SkillLibrary // nil: no library (SetSkills)

	images imagesSeen // images the platform reported present (checkImages)
}

// New returns a service; ship is the client of the ship runtime type (nil = a default one).
// clock nil = bay.SystemClock; log nil = discard.
func New(store bay.Store, driver bay.Driver, ship *shipclient.Client, clock bay.Clock, log *slog.Logger, cfg Config) *Service {
	cfg.applyDefaults()
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ship == nil {
		ship = shipclient.New(nil, log)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &Service{
		store: store, driver: driver, clock: clock,
		cargos:   cargo.New(store, driver, clock, log, cargo.Config{InstanceID: cfg.InstanceID, Deployment: cfg.Deployment, DefaultSizeMB: cfg.DefaultCargoSizeMB}),
		runtimes: runtime.Clients{bay.RuntimeShip: ship},
		log:      log.With("component", "sandbox"),
		cfg:      cfg,
		profiles: map[string]*bay.Profile{},
		bootID:   cfg.InstanceID + "/" + hex.EncodeToString(b[:]),
		probed:   map[string]time.Time{},

		startCancels: map[string]context.CancelFunc{},
	}
	for i := range cfg.Profiles {
		s.profiles[cfg.Profiles[i].ID] = &s.cfg.Profiles[i]
	}
	return s
}

// SetWarmClaimer installs the warm pool (nil = none). Safe to call while serving.
func (s *Service) SetWarmClaimer(w WarmClaimer) {
	s.warmMu.Lock()
	s.warm = w
	s.warmMu.Unlock()
}

func (s *Service) warmClaimer() WarmClaimer {
	s.warmMu.RLock()
	defer s.warmMu.RUnlock()
	return s.warm
}

// BootID identifies this process on the session rows it starts: "<instance_id>/<random>".
func (s *Service) BootID() string { return s.bootID }

// SetHealthCheck replaces every runtime client by one whose health is f and which describes
// nothing (tests that start sessions without talking to a runtime).
func (s *Service) SetHealthCheck(f func(ctx context.Context, endpoint string) error) {
	for t := range s.runtimes {
		s.runtimes[t] = healthOnly(f)
	}
}

// healthOnly is a runtime client with the given health and no description.
type healthOnly func(ctx context.Context, endpoint string) error

func (h healthOnly) Health(ctx context.Context, ep string) error { return h(ctx, ep) }
func (healthOnly) Describe(context.Context, string) (runtime.Meta, error) {
	return runtime.Meta{}, nil
}
func (healthOnly) ForgetEndpoint(string) {}

// SetRuntime installs the client of a runtime type (before serving).
func (s *Service) SetRuntime(runtimeType string, c runtime.Client) { s.runtimes[runtimeType] = c }

// Runtime returns the client of a runtime type.
func (s *Service) Runtime(runtimeType string) (runtime.Client, error) {
	return s.runtimes.For(runtimeType)
}

// Now is the service's clock in UTC at the database's precision.
func (s *Service) Now() time.Time { return s.now() }

// Store returns the store (read-only use by GC and warm pool; writes go through the service).
func (s *Service) Store() bay.Store { return s.store }

// Cargos returns the cargo service (sharing the store, driver and configuration).
func (s *Service) Cargos() *cargo.Service { return s.cargos }

// Driver returns the driver.
func (s *Service) Driver() bay.Driver { return s.driver }

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// Profile returns the profile with id, or nil.
func (s *Service) Profile(id string) *bay.Profile { return s.profiles[id] }

// Profiles returns the configured profiles in config order.
func (s *Service) Profiles() []bay.Profile { return s.cfg.Profiles }

// now returns the clock's time in UTC, truncated to microseconds (the wire and DB precision).
func (s *Service) now() time.Time { return bay.Stamp(s.clock) }

// ---- lookups ----

// currentSession returns the sandbox's current session or nil (also when the row vanished).
func (s *Service) currentSession(ctx context.Context, r bay.Reader, sb *bay.Sandbox) (*bay.Session, error) {
	if sb.CurrentSessionID == "" {
		return nil, nil
	}
	sess, err := r.GetSession(ctx, sb.CurrentSessionID)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, nil
		}
		return nil, bay.Internal("Failed to load session", fmt.Errorf("get session %s: %w", sb.CurrentSessionID, err))
	}
	return sess, nil
}

// ---- single flight ----

type flight struct {
	done chan struct{}
	sess *bay.Session
	err  error

	// mu guards partial and changed: the starting session with the containers that are ready
	// so far (Status "running"), published while the others still start, and a channel closed
	// (and replaced) at each publication.
	mu      sync.Mutex
	partial *bay.Session
	changed chan struct{}
}

// publish makes a copy of sess (a starting session some of whose containers are ready) what
// callers waiting for one of those containers get.
func (f *flight) publish(sess *bay.Session) {
	cp := *sess
	cp.Containers = slices.Clone(sess.Containers)
	f.mu.Lock()
	f.partial = &cp
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// readyFor returns the published session when its container named need is ready, and the
// channel closed at the next publication.
func (f *flight) readyFor(need string) (*bay.Session, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partial != nil {
		if c := f.partial.Container(need); c != nil && c.Status == containerReady && c.Endpoint != "" {
			cp := *f.partial
			cp.Containers = slices.Clone(f.partial.Containers)
			return &cp, f.changed
		}
	}
	return nil, f.changed
}

// flightGroup runs at most one function per key at a time; callers arriving meanwhile wait
// for its result (or for their own context).
type flightGroup struct {
	mu sync.Mutex
	m  map[string]*flight
}

// do runs fn in its own goroutine (so that it finishes even when every caller gave up) unless
// one is already running for key, and waits for the result or ctx. A caller that names the
// container it needs (need != "") returns as soon as fn published a session in which that
// container is ready (fn's publish), while fn goes on with the others; need "" waits for fn's
// result.
func (g *flightGroup) do(ctx context.Context, key, need string, fn func(publish func(*bay.Session)) (*bay.Session, error)) (*bay.Session, error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*flight{}
	}
	f, ok := g.m[key]
	if !ok {
		f = &flight{done: make(chan struct{}), changed: make(chan struct{})}
		g.m[key] = f
		go func() {
			defer close(f.done)
			f.sess, f.err = fn(f.publish)
			g.mu.Lock()
			delete(g.m, key)
			g.mu.Unlock()
		}()
	}
	g.mu.Unlock()
	for {
		var changed <-chan struct{}
		if need != "" {
			var sess *bay.Session
			if sess, changed = f.readyFor(need); sess != nil {
				return sess, nil
			}
		}
		select {
		case <-f.done:
			return f.sess, f.err
		case <-changed:
		case <-ctx.Done():
			return nil, bay.Errorf(bay.CodeSessionNotReady, "Request cancelled while the session was starting").WithCause(ctx.Err())
		}
	}
}
