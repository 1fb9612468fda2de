package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
)

// spareFiles lists the finished spare cargo files in dir.
func spareFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, ".spare"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".img") {
			out = append(out, e.Name())
		}
	}
	return out
}

// After a bounded cargo is made, the driver formats and mounts spare files of its size in the
// background; the next cargo of that size takes one (its filesystem is mounted at the cargo's
// place, the size asked for and empty), and Close unmounts and removes the spares left.
func TestSpareCargoFiles(t *testing.T) {
	requireEngine(t)
	dir := t.TempDir()
	cfg := docker.DefaultConfig()
	cfg.CargoQuota, cfg.CargoDir = docker.CargoQuotaLoop, dir
	d := newDriver(t, cfg)
	ctx := context.Background()
	run := fmt.Sprintf("spares-%d", time.Now().UnixNano())
	const size = 64 << 20
	create := func(i int) string {
		t.Helper()
		ref, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: fmt.Sprintf("drivertest-%s-%d", run, i), SizeBytes: size,
			Labels: map[string]string{drivertest.LabelTestRun: run}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.DeleteVolume(context.WithoutCancel(ctx), ref); err != nil {
				t.Errorf("delete volume %s: %v", ref, err)
			}
		})
		return ref
	}

	create(0)
	deadline := time.Now().Add(time.Minute)
	for len(spareFiles(t, dir)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("spares after a minute: %v", spareFiles(t, dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := spareFiles(t, dir)
	ref := create(1)
	after := spareFiles(t, dir)
	if len(after) != len(before)-1 {
		t.Fatalf("spares before the create %v, after %v: want one taken", before, after)
	}
	info, err := d.InspectVolume(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// ext4's own metadata takes a little of the file.
	if info.SizeBytes < size*9/10 || info.SizeBytes > size || info.UsedBytes < 0 || info.UsedBytes > size/10 {
		t.Fatalf("cargo from a spare: size %d used %d, want about %d and nearly empty", info.SizeBytes, info.UsedBytes, size)
	}
	ents, err := os.ReadDir(filepath.Join(dir, ref))
	if err != nil || len(ents) != 0 {
		t.Fatalf("cargo from a spare holds %v (%v), want nothing", ents, err)
	}

	// The refill after the take, then Close: nothing of the spares stays.
	time.Sleep(2 * time.Second)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(filepath.Join(dir, ".spare")); err != nil || len(ents) != 0 {
		t.Fatalf("spares left after Close: %v (%v)", ents, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), filepath.Join(dir, ".spare")+"/") {
		t.Fatalf("a spare is still mounted after Close:\n%s", mi)
	}
}
