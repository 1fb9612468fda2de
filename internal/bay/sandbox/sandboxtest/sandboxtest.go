// Package sandboxtest builds the services of a sandbox (lifecycle, capabilities, history) over
// an in-process SQLite store, the scriptable fake driver and the ship stub, for the tests of
// those services.
package sandboxtest

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// Clock is a settable bay.Clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Profiles are the test profiles: python-default (every code capability, profile and
// container environment) and shell-only.
func Profiles() []bay.Profile {
	return []bay.Profile{{
		ID: "python-default",
		Containers: []bay.ContainerProfile{{Name: "primary", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123,
			Resources: bay.Resources{CPUs: 1, Memory: "1g", MemoryBytes: 1 << 30}, Capabilities: bay.DefaultCapabilities, PrimaryFor: bay.DefaultCapabilities,
			Env: map[string]string{"FOO": "bar:baz"}}},
		Env:         map[string]string{"PROFILE_VAR": "1"},
		IdleTimeout: 30 * time.Minute,
	}, {
		ID:          "shell-only",
		Containers:  []bay.ContainerProfile{{Name: "primary", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123, Capabilities: []string{"shell"}}},
		IdleTimeout: 30 * time.Minute,
	}}
}

// Options adjust New.
type Options struct {
	// Config adjusts the lifecycle's configuration.
	Config func(*sandbox.Config)
	// Capability is the capability service's configuration.
	Capability capability.Config
	// Endpoint, when set, gives each instance's containers their address (default: the stub's).
	Endpoint func(stub *shipstub.Stub) func(instance string, c bay.ContainerSpec) string
	// Images, when set, are the only images the fake engine has (fake.WithImages).
	Images []string
}

// Env is a lifecycle service with its capability and history services.
type Env struct {
	Svc   *sandbox.Service
	Caps  *capability.Service
	Hist  *history.Service
	Store *sqlite.Store
	Drv   *fake.Driver
	Ship  *shipstub.Stub
	Clock *Clock
}

// New builds an Env; the lifecycle has the test profiles, instance id "test" and a 5 s
// readiness timeout before o.Config adjusts it. Everything is closed at the end of the test.
func New(t *testing.T, o Options) *Env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	stub := shipstub.New()
	t.Cleanup(stub.Close)
	endpoint := func(string, bay.ContainerSpec) string { return stub.URL() }
	if o.Endpoint != nil {
		endpoint = o.Endpoint(stub)
	}
	opts := []fake.Option{fake.WithEndpointFunc(endpoint)}
	if o.Images != nil {
		opts = append(opts, fake.WithImages(o.Images...))
	}
	drv := fake.New(opts...)
	clk := NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	cfg := sandbox.Config{Profiles: Profiles(), InstanceID: "test", ReadinessTimeout: 5 * time.Second}
	if o.Config != nil {
		o.Config(&cfg)
	}
	ship := shipclient.New(nil, nil)
	svc := sandbox.New(st, drv, ship, clk, nil, cfg)
	// The stub answers /health and /meta like any runtime: it stands in for gull too.
	svc.SetRuntime(bay.RuntimeGull, ship)
	return &Env{
		Svc: svc, Caps: capability.New(svc, ship, nil, o.Capability), Hist: history.New(st),
		Store: st, Drv: drv, Ship: stub, Clock: clk,
	}
}

// Create creates a sandbox of owner's or fails the test.
func (e *Env) Create(t *testing.T, owner string, p sandbox.CreateParams) *bay.SandboxView {
	t.Helper()
	r, err := e.Svc.CreateSandbox(context.Background(), owner, p, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return r
}

// Started creates a sandbox of alice's and starts its session.
func (e *Env) Started(t *testing.T) (*bay.SandboxView, *bay.Session) {
	t.Helper()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	s, err := e.Svc.EnsureRunning(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

// Code is the error's code, "" for nil (bay.ErrorCode(nil) is internal_error).
func Code(err error) string {
	if err == nil {
		return ""
	}
	return bay.ErrorCode(err)
}
