package sandbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// runtimes gives every instance its own address in front of the ship stub, so that a test can
// make one runtime vanish (its address refuses connections) or freeze (it accepts and never
// answers), as a killed or stopped container would.
type runtimes struct {
	stub   *shipstub.Stub
	mu     sync.Mutex
	srv    map[string]*httptest.Server // instance name -> its runtime
	frozen map[string]bool
	thaw   chan struct{} // closed at the end of the test: frozen requests return
}

func (r *runtimes) endpoint(instance string, _ bay.ContainerSpec) string {
	target, _ := url.Parse(r.stub.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		frozen := r.frozen[instance]
		r.mu.Unlock()
		if frozen {
			select {
			case <-r.thaw:
			case <-req.Context().Done():
			}
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	r.mu.Lock()
	r.srv[instance] = srv
	r.mu.Unlock()
	return srv.URL
}

// kill makes the instance's address refuse connections.
func (r *runtimes) kill(instance string) {
	r.mu.Lock()
	srv := r.srv[instance]
	r.mu.Unlock()
	srv.CloseClientConnections()
	srv.Listener.Close()
}

// freeze makes the instance's runtime accept requests and never answer them.
func (r *runtimes) freeze(instance string) {
	r.mu.Lock()
	r.frozen[instance] = true
	r.mu.Unlock()
}

func (r *runtimes) close() {
	close(r.thaw)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.srv {
		s.Close()
	}
}

// newFaultEnv is newEnv with a runtime per instance and a fast watchdog.
func newFaultEnv(t *testing.T) (*env, *runtimes) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: t.TempDir() + "/bay.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	stub := shipstub.New()
	t.Cleanup(stub.Close)
	rt := &runtimes{stub: stub, srv: map[string]*httptest.Server{}, frozen: map[string]bool{}, thaw: make(chan struct{})}
	t.Cleanup(rt.close)
	drv := fake.New(fake.WithEndpointFunc(rt.endpoint))
	clk := &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	svc := sandbox.New(st, drv, shipclient.New(nil, nil), clk, nil, sandbox.Config{
		Profiles: testProfiles(), InstanceID: "test", ReadinessTimeout: 5 * time.Second,
		WatchdogDelay: 50 * time.Millisecond, WatchdogEvery: 100 * time.Millisecond,
	})
	return &env{svc: svc, store: st, drv: drv, ship: stub, clock: clk}, rt
}

// started creates a sandbox of alice's and starts its session.
func started(t *testing.T, e *env) (*bayapi.SandboxResponse, *bay.Session) {
	t.Helper()
	r := e.create(t, "alice", sandbox.CreateParams{})
	s, err := e.svc.EnsureRunning(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

// A runtime killed while its session was still trusted (within the probe cache): the
// platform's death report makes the next call re-check the instance, start a new session and
// answer.
func TestKilledRuntimeRecoversWithinTheCall(t *testing.T) {
	e, rt := newFaultEnv(t)
	ctx := context.Background()
	r, s1 := started(t, e)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go e.svc.WatchDeaths(wctx)
	for e.drv.CallCount(fake.MethodWatchDeaths) == 0 {
		time.Sleep(time.Millisecond)
	}
	rt.kill(bay.InstanceName(s1.ID))
	e.drv.Kill(s1.Primary().ContainerID) // the platform reports the death
	resp, err := e.svc.ExecShell(ctx, "alice", r.ID, sandbox.ShellParams{Command: "echo hi", Timeout: 30})
	if err != nil || !resp.Success {
		t.Fatalf("exec after the kill: %+v, %v; want it answered by a new session", resp, err)
	}
	s2, _ := e.svc.EnsureRunning(ctx, r.ID)
	if s2.ID == s1.ID || len(e.drv.Instances()) != 1 {
		t.Fatalf("session %s (was %s), instances %v", s2.ID, s1.ID, e.drv.Instances())
	}
}

// A runtime that accepts and never answers (frozen) ends the call after the watchdog's misses
// with a retryable 503; its session is replaced, and the next call is answered.
func TestFrozenRuntimeEndsTheCallAndIsReplaced(t *testing.T) {
	e, rt := newFaultEnv(t)
	ctx := context.Background()
	r, s1 := started(t, e)
	rt.freeze(bay.InstanceName(s1.ID))
	began := time.Now()
	_, err := e.svc.ExecPython(ctx, "alice", r.ID, sandbox.PythonParams{Code: "1", Timeout: 300})
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Details["retry_after_ms"] == nil {
		t.Fatalf("call to a frozen runtime: %v, want 503 session_not_ready with retry_after_ms", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the call took %v; the watchdog should end it after about 3 missed checks", took)
	}
	if _, err := e.svc.ExecPython(ctx, "alice", r.ID, sandbox.PythonParams{Code: "1", Timeout: 30}); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if s2, _ := e.svc.EnsureRunning(ctx, r.ID); s2.ID == s1.ID {
		t.Fatal("the frozen session was kept")
	}
}

// A call waiting for a cold start ends at once when the sandbox is stopped (503, retryable) or
// deleted (404), instead of waiting out the readiness timeout.
func TestStopOrDeleteEndsACallWaitingForTheStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(e *env, id string) error
		code string
	}{
		{"stop", func(e *env, id string) error { return e.svc.StopSandbox(context.Background(), "alice", id) }, bay.CodeSessionNotReady},
		{"delete", func(e *env, id string) error { return e.svc.DeleteSandbox(context.Background(), "alice", id) }, bay.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *sandbox.Config) { c.ReadinessTimeout = time.Minute })
			e.svc.SetHealthCheck(func(context.Context, string) error { return errors.New("not up yet") })
			r := e.create(t, "alice", sandbox.CreateParams{})
			done := make(chan error, 1)
			began := time.Now()
			go func() {
				_, err := e.svc.ExecShell(context.Background(), "alice", r.ID, sandbox.ShellParams{Command: "ls", Timeout: 30})
				done <- err
			}()
			for len(e.drv.Instances()) == 0 { // the start is under way
				time.Sleep(5 * time.Millisecond)
			}
			if err := tc.do(e, r.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if code(err) != tc.code {
					t.Fatalf("call after %s: %v, want %s", tc.name, err, tc.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the call still waits %v after the %s", time.Since(began), tc.name)
			}
			if n := len(e.drv.Instances()); n != 0 {
				t.Fatalf("%d instances left", n)
			}
		})
	}
}

// A runtime that vanished without a report: the call that cannot connect finds the container
// dead, sends the request to a new session (it never reached the old one) and answers.
func TestUnreachableRuntimeIsResentToANewSession(t *testing.T) {
	e, rt := newFaultEnv(t)
	ctx := context.Background()
	r, s1 := started(t, e)
	rt.kill(bay.InstanceName(s1.ID))
	e.drv.SetState(s1.Primary().ContainerID, bay.ContainerExited)
	// The pool's connection to the old runtime was closed by its end: the client notices and
	// dials, which is refused.
	time.Sleep(20 * time.Millisecond)
	resp, err := e.svc.ExecShell(ctx, "alice", r.ID, sandbox.ShellParams{Command: "echo hi", Timeout: 30})
	if err != nil || !resp.Success {
		t.Fatalf("exec after the runtime vanished: %+v, %v; want it resent to a new session", resp, err)
	}
	if s2, _ := e.svc.EnsureRunning(ctx, r.ID); s2.ID == s1.ID {
		t.Fatal("the dead session was kept")
	}
}
