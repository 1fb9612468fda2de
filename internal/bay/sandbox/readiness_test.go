package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// TestReadinessTimeoutRemovesTheContainer runs the readiness wait in a synctest bubble: the
// runtime never becomes healthy, the wait gives up after exactly ReadinessTimeout (10 ms
// probes for 2 s, then backing off to 250 ms), the container is removed and the caller gets 503 session_not_ready.
func TestReadinessTimeoutRemovesTheContainer(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var probes atomic.Int64
		svc, drv, r := readinessSandbox(t, dir, func() error {
			probes.Add(1)
			return errors.New("connection refused")
		})
		start := time.Now()
		_, err := svc.EnsureRunning(ctx, r.ID)
		elapsed := time.Since(start)
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Message != "Runtime failed to become ready" || be.Details["retry_after_ms"] != 1000 {
			t.Fatalf("err = %v", err)
		}
		if elapsed != 10*time.Second {
			t.Fatalf("gave up after %v, want the 10 s bound", elapsed)
		}
		// Every 10 ms for 2 s (~200), then 20, 40, 80, 160 and every 250 ms: about
		// 200 + 4 + (10 s - 2.3 s)/250 ms probes.
		if n := probes.Load(); n < 230 || n > 240 {
			t.Fatalf("%d probes", n)
		}
		if c := drv.Containers(); len(c) != 0 {
			t.Fatalf("container left: %+v", c)
		}
		got, err := svc.GetSandbox(ctx, "alice", r.ID)
		if err != nil || got.Status != "failed" {
			t.Fatalf("status: %v %v", got, err)
		}
	})
}

// TestReadinessStopsAtAForeignRuntime: a runtime that refuses the session's token is another
// sandbox's (it was given a dead container's address), so the wait ends at the first answer
// instead of taking it for ready or waiting out the timeout, and the instance is removed.
func TestReadinessStopsAtAForeignRuntime(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var probes atomic.Int64
		svc, drv, r := readinessSandbox(t, dir, func() error {
			probes.Add(1)
			return fmt.Errorf("%w: 401", runtime.ErrForeign)
		})
		start := time.Now()
		_, err := svc.EnsureRunning(ctx, r.ID)
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Details["retry_after_ms"] != 1000 {
			t.Fatalf("err = %v, want a retryable session_not_ready", err)
		}
		if elapsed, n := time.Since(start), probes.Load(); elapsed != 0 || n != 1 {
			t.Fatalf("gave up after %v and %d probes, want the first answer", elapsed, n)
		}
		if c := drv.Containers(); len(c) != 0 {
			t.Fatalf("container left: %+v", c)
		}
	})
}

// readinessSandbox is a lifecycle service on a fake driver whose runtime health is health, with
// one sandbox of alice's created; the store closes with the test.
func readinessSandbox(t *testing.T, dir string, health func() error) (*sandbox.Service, *fake.Driver, *bay.SandboxView) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	drv := fake.New()
	svc := sandbox.New(st, drv, shipclient.New(nil, nil), nil, nil, sandbox.Config{
		Profiles: testProfiles(), InstanceID: "test", ReadinessTimeout: 10 * time.Second,
	})
	svc.SetHealthCheck(func(context.Context, string) error { return health() })
	r, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc, drv, r
}
