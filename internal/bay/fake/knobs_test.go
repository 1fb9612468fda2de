package fake_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
)

var errBoom = errors.New("boom")

func spec(name string) bay.ContainerSpec {
	return bay.ContainerSpec{Name: name, Image: "img", RuntimePort: 8123, User: "1000:1000"}
}

func TestFailTimesAndAlways(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.Fail(fake.MethodPing, errBoom, 2)
	for i, want := range []error{errBoom, errBoom, nil, nil} {
		if err := d.Ping(ctx); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("call %d: got %v, want %v", i, err, want)
		}
	}
	d.Fail(fake.MethodPing, errBoom, fake.Always)
	for i := range 5 {
		if err := d.Ping(ctx); !errors.Is(err, errBoom) {
			t.Fatalf("always, call %d: got %v", i, err)
		}
	}
	d.ClearFailures()
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("after ClearFailures: %v", err)
	}
	if got := d.CallCount(fake.MethodPing); got != 10 {
		t.Fatalf("CallCount = %d, want 10", got)
	}
}

func TestFailAfterHasNoEffect(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.FailAfter(fake.MethodCreateContainer, 1, errBoom, 1)
	if _, err := d.CreateContainer(ctx, spec("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateContainer(ctx, spec("b")); !errors.Is(err, errBoom) {
		t.Fatalf("second create: %v, want boom", err)
	}
	if _, err := d.CreateContainer(ctx, spec("c")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range d.Containers() {
		names = append(names, c.Spec.Name)
	}
	if fmt.Sprint(names) != "[a c]" {
		t.Fatalf("containers = %v, want [a c] (a failed call must have no effect)", names)
	}
	calls := d.Calls()
	if len(calls) != 3 || calls[1].Target != "b" || !errors.Is(calls[1].Err, errBoom) || calls[1].Spec == nil {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestFailLateTakesEffect(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.FailLate(fake.MethodCreateContainer, errBoom, 1)
	if _, err := d.CreateContainer(ctx, spec("orphan")); !errors.Is(err, errBoom) {
		t.Fatalf("create: %v, want boom", err)
	}
	if _, ok := d.Container("orphan"); !ok {
		t.Fatal("FailLate must leave the container behind")
	}
}

func TestFailWhenMayCallTheDriver(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	id, err := d.CreateContainer(ctx, spec("victim"))
	if err != nil {
		t.Fatal(err)
	}
	d.FailWhen(fake.MethodStartContainer, func(c fake.Call) error {
		if c.Target == id {
			d.Kill(id) // re-entrant: must not deadlock
			return errBoom
		}
		return nil
	})
	if _, err := d.StartContainer(ctx, id); !errors.Is(err, errBoom) {
		t.Fatalf("start: %v", err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fake.New()
		d.SetLatency(fake.MethodCreateVolume, time.Minute)

		start := time.Now()
		if _, err := d.CreateVolume(t.Context(), "v1", nil); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Fatalf("latency = %v, want 1m", got)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := d.CreateVolume(ctx, "v2", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("create with short deadline: %v", err)
		}
		if len(d.Volumes()) != 1 {
			t.Fatalf("a timed-out call must have no effect: %v", d.Volumes())
		}
	})
}

func TestKillVanishSetState(t *testing.T) {
	ctx := t.Context()
	d := fake.New(fake.WithEndpointFunc(func(s bay.ContainerSpec) string { return "http://stub/" + s.Name }))
	id, _ := d.CreateContainer(ctx, spec("k"))
	ep, err := d.StartContainer(ctx, id)
	if err != nil || ep != "http://stub/k" {
		t.Fatalf("start = %q, %v", ep, err)
	}
	d.Kill(id)
	info, err := d.InspectContainer(ctx, id)
	if err != nil || info.State != bay.ContainerExited || info.Endpoint != "" {
		t.Fatalf("after kill: %+v, %v", info, err)
	}
	d.SetState(id, bay.ContainerPaused)
	if info, _ := d.InspectContainer(ctx, "k"); info.State != bay.ContainerPaused {
		t.Fatalf("state = %s", info.State)
	}
	d.Vanish(id)
	if _, err := d.InspectContainer(ctx, id); !bay.IsNotFound(err) {
		t.Fatalf("after vanish: %v", err)
	}
}

func TestPingDown(t *testing.T) {
	d := fake.New()
	d.SetDown(true)
	if err := d.Ping(t.Context()); bay.ErrorCode(err) != bay.CodeUnavailable {
		t.Fatalf("ping = %v, want unavailable", err)
	}
}

func TestUnknownMethodPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	fake.New().Fail("CreateContaner", errBoom, 1)
}

func TestConcurrentUse(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.Fail(fake.MethodCreateContainer, errBoom, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range 50 {
		wg.Go(func() {
			id, err := d.CreateContainer(ctx, spec(fmt.Sprintf("c%d", i)))
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			_, _ = d.StartContainer(ctx, id)
			_, _ = d.ListContainers(ctx, nil)
			_ = d.RemoveContainer(ctx, id)
		})
	}
	wg.Wait()
	if failed != 10 || len(d.Containers()) != 0 {
		t.Fatalf("failed = %d (want 10), left = %d", failed, len(d.Containers()))
	}
}
