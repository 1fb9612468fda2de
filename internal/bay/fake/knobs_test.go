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

func spec(name string) bay.InstanceSpec {
	return bay.InstanceSpec{Name: name, Containers: []bay.ContainerSpec{
		{Name: "ship", RuntimeType: bay.RuntimeShip, Image: "img", Port: 8123, User: "1000:1000"},
	}}
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
	d.FailAfter(fake.MethodCreateInstance, 1, errBoom, 1)
	if _, err := d.CreateInstance(ctx, spec("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateInstance(ctx, spec("b")); !errors.Is(err, errBoom) {
		t.Fatalf("second create: %v, want boom", err)
	}
	if _, err := d.CreateInstance(ctx, spec("c")); err != nil {
		t.Fatal(err)
	}
	if names := d.Instances(); fmt.Sprint(names) != "[a c]" {
		t.Fatalf("instances = %v, want [a c] (a failed call must have no effect)", names)
	}
	calls := d.Calls()
	if len(calls) != 3 || calls[1].Target != "b" || !errors.Is(calls[1].Err, errBoom) || calls[1].Spec == nil {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestFailLateTakesEffect(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.FailLate(fake.MethodCreateInstance, errBoom, 1)
	if _, err := d.CreateInstance(ctx, spec("orphan")); !errors.Is(err, errBoom) {
		t.Fatalf("create: %v, want boom", err)
	}
	if _, ok := d.Container("orphan"); !ok {
		t.Fatal("FailLate must leave the instance behind")
	}
}

func TestFailWhenMayCallTheDriver(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	if _, err := d.CreateInstance(ctx, spec("victim")); err != nil {
		t.Fatal(err)
	}
	d.FailWhen(fake.MethodInspectInstance, func(c fake.Call) error {
		if c.Target == "victim" {
			d.Kill("victim") // re-entrant: must not deadlock
			return errBoom
		}
		return nil
	})
	if _, err := d.InspectInstance(ctx, "victim"); !errors.Is(err, errBoom) {
		t.Fatalf("inspect: %v", err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fake.New()
		d.SetLatency(fake.MethodCreateVolume, time.Minute)

		start := time.Now()
		if _, err := d.CreateVolume(t.Context(), bay.VolumeSpec{Name: "v1"}); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Fatalf("latency = %v, want 1m", got)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: "v2"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("create with short deadline: %v", err)
		}
		if len(d.Volumes()) != 1 {
			t.Fatalf("a timed-out call must have no effect: %v", d.Volumes())
		}
	})
}

func TestKillVanishSetState(t *testing.T) {
	ctx := t.Context()
	d := fake.New(fake.WithEndpointFunc(func(inst string, c bay.ContainerSpec) string { return "http://stub/" + inst + "/" + c.Name }))
	inst, err := d.CreateInstance(ctx, spec("k"))
	if err != nil || inst.Containers[0].Endpoint != "http://stub/k/ship" {
		t.Fatalf("create = %+v, %v", inst, err)
	}
	id := inst.Containers[0].ID
	d.Kill(id)
	got, err := d.InspectInstance(ctx, "k")
	if err != nil || got.Running() || got.Containers[0].State != bay.ContainerExited || got.Containers[0].Endpoint != "" {
		t.Fatalf("after kill: %+v, %v", got, err)
	}
	d.SetState(id, bay.ContainerPaused)
	if got, _ := d.InspectInstance(ctx, "k"); got.Containers[0].State != bay.ContainerPaused {
		t.Fatalf("state = %s", got.Containers[0].State)
	}
	d.Vanish(id)
	if _, err := d.InspectInstance(ctx, "k"); !bay.IsNotFound(err) {
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
	fake.New().Fail("CreateInstanc", errBoom, 1)
}

func TestConcurrentUse(t *testing.T) {
	ctx := t.Context()
	d := fake.New()
	d.Fail(fake.MethodCreateInstance, errBoom, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range 50 {
		wg.Go(func() {
			name := fmt.Sprintf("c%d", i)
			if _, err := d.CreateInstance(ctx, spec(name)); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			_, _ = d.InspectInstance(ctx, name)
			_, _ = d.ListInstances(ctx, nil)
			_ = d.DestroyInstance(ctx, name)
		})
	}
	wg.Wait()
	if failed != 10 || len(d.Containers()) != 0 {
		t.Fatalf("failed = %d (want 10), left = %d", failed, len(d.Containers()))
	}
}
