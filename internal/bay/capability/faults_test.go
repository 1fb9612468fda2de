package capability_test

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

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
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

// newFaultEnv builds the services with a runtime per instance and a fast watchdog.
func newFaultEnv(t *testing.T) (*sandboxtest.Env, *runtimes) {
	t.Helper()
	rt := &runtimes{srv: map[string]*httptest.Server{}, frozen: map[string]bool{}, thaw: make(chan struct{})}
	e := sandboxtest.New(t, sandboxtest.Options{
		Capability: capability.Config{WatchdogDelay: 50 * time.Millisecond, WatchdogEvery: 100 * time.Millisecond},
		Endpoint: func(stub *shipstub.Stub) func(string, bay.ContainerSpec) string {
			rt.stub = stub
			return rt.endpoint
		},
	})
	t.Cleanup(rt.close)
	return e, rt
}

// A runtime killed while its session was still trusted (within the probe cache): the
// platform's death report makes the next call re-check the instance, start a new session and
// answer.
func TestKilledRuntimeRecoversWithinTheCall(t *testing.T) {
	e, rt := newFaultEnv(t)
	ctx := context.Background()
	r, s1 := e.Started(t)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go e.Svc.WatchDeaths(wctx)
	for e.Drv.CallCount(fake.MethodWatchDeaths) == 0 {
		time.Sleep(time.Millisecond)
	}
	rt.kill(bay.InstanceName(s1.ID))
	e.Drv.Kill(s1.Primary().ContainerID) // the platform reports the death
	resp, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "echo hi", Timeout: 30})
	if err != nil || !resp.Success {
		t.Fatalf("exec after the kill: %+v, %v; want it answered by a new session", resp, err)
	}
	s2, _ := e.Svc.EnsureRunning(ctx, r.ID)
	if s2.ID == s1.ID || len(e.Drv.Instances()) != 1 {
		t.Fatalf("session %s (was %s), instances %v", s2.ID, s1.ID, e.Drv.Instances())
	}
}

// A runtime that accepts and never answers (frozen) ends the call after the watchdog's misses
// with a retryable 503; its session is replaced, and the next call is answered.
func TestFrozenRuntimeEndsTheCallAndIsReplaced(t *testing.T) {
	e, rt := newFaultEnv(t)
	ctx := context.Background()
	r, s1 := e.Started(t)
	rt.freeze(bay.InstanceName(s1.ID))
	began := time.Now()
	_, err := e.Caps.ExecPython(ctx, "alice", r.ID, capability.PythonParams{Code: "1", Timeout: 300})
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Details["retry_after_ms"] == nil {
		t.Fatalf("call to a frozen runtime: %v, want 503 session_not_ready with retry_after_ms", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the call took %v; the watchdog should end it after about 3 missed checks", took)
	}
	if _, err := e.Caps.ExecPython(ctx, "alice", r.ID, capability.PythonParams{Code: "1", Timeout: 30}); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if s2, _ := e.Svc.EnsureRunning(ctx, r.ID); s2.ID == s1.ID {
		t.Fatal("the frozen session was kept")
	}
}

// A call waiting for a cold start ends at once when the sandbox is stopped (503, retryable) or
// deleted (404), instead of waiting out the readiness timeout.
func TestStopOrDeleteEndsACallWaitingForTheStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(e *sandboxtest.Env, id string) error
		code string
	}{
		{"stop", func(e *sandboxtest.Env, id string) error { return e.Svc.StopSandbox(context.Background(), "alice", id) }, bay.CodeSessionNotReady},
		{"delete", func(e *sandboxtest.Env, id string) error {
			return e.Svc.DeleteSandbox(context.Background(), "alice", id)
		}, bay.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := sandboxtest.New(t, sandboxtest.Options{Config: func(c *sandbox.Config) { c.ReadinessTimeout = time.Minute }})
			e.Svc.SetHealthCheck(func(context.Context, string) error { return errors.New("not up yet") })
			r := e.Create(t, "alice", sandbox.CreateParams{})
			done := make(chan error, 1)
			began := time.Now()
			go func() {
				_, err := e.Caps.ExecShell(context.Background(), "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30})
				done <- err
			}()
			for len(e.Drv.Instances()) == 0 { // the start is under way
				time.Sleep(5 * time.Millisecond)
			}
			if err := tc.do(e, r.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if sandboxtest.Code(err) != tc.code {
					t.Fatalf("call after %s: %v, want %s", tc.name, err, tc.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the call still waits %v after the %s", time.Since(began), tc.name)
			}
			if n := len(e.Drv.Instances()); n != 0 {
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
	r, s1 := e.Started(t)
	rt.kill(bay.InstanceName(s1.ID))
	e.Drv.SetState(s1.Primary().ContainerID, bay.ContainerExited)
	// The pool's connection to the old runtime was closed by its end: the client notices and
	// dials, which is refused.
	time.Sleep(20 * time.Millisecond)
	resp, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "echo hi", Timeout: 30})
	if err != nil || !resp.Success {
		t.Fatalf("exec after the runtime vanished: %+v, %v; want it resent to a new session", resp, err)
	}
	if s2, _ := e.Svc.EnsureRunning(ctx, r.ID); s2.ID == s1.ID {
		t.Fatal("the dead session was kept")
	}
}
