package e2e

import (
	"testing"
)

// TestDiskIsBounded: what user code writes cannot grow the host's disk beyond what the
// sandbox was given. The cargo stops at its size limit with "No space left on device"
// (the cargo API reports the limit enforced and the bytes used), /tmp at its tmpfs size, and
// the root filesystem is read-only.
func TestDiskIsBounded(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{})
	cargo := expect(t, b.do("POST", "/v1/cargos", map[string]any{"size_limit_mb": 64}, nil), 201, "create cargo").Str("id")
	t.Cleanup(func() { b.do("DELETE", "/v1/cargos/"+cargo, nil, nil) })
	sb := b.create(map[string]any{"cargo_id": cargo}, nil)
	id := sb.Str("id")
	t.Cleanup(func() { b.do("DELETE", "/v1/sandboxes/"+id, nil, nil) })

	out := b.shell(id, map[string]any{"command": "dd if=/dev/zero of=big bs=1M count=100 2>&1; ls -s --block-size=M big", "timeout": 60})
	contains(t, out.Str("output"), "No space left on device", "dd beyond the cargo's 64 MB")
	got := expect(t, b.do("GET", "/v1/cargos/"+cargo, nil, nil), 200, "get cargo")
	if got.Get("size_limit_enforced") != true {
		t.Errorf("size_limit_enforced = %v, want true: %s", got.Get("size_limit_enforced"), got)
	}
	if used, _ := got.Get("size_used_bytes").(float64); used < 50<<20 || used > 64<<20 {
		t.Errorf("size_used_bytes = %v, want about 64 MB", got.Get("size_used_bytes"))
	}
	// Freeing space makes the cargo writable again.
	if o := b.shellOK(id, "rm big && echo ok > small && cat small"); o != "ok\n" && o != "ok" {
		t.Errorf("write after freeing: %q", o)
	}

	out = b.shell(id, map[string]any{"command": "dd if=/dev/zero of=/tmp/big bs=1M count=300 2>&1; rm -f /tmp/big", "timeout": 60})
	contains(t, out.Str("output"), "No space left on device", "dd beyond /tmp's size")
	out = b.shell(id, map[string]any{"command": "touch /usr/local/x /home/x /var/x 2>&1; true", "timeout": 30})
	contains(t, out.Str("output"), "Read-only file system", "write to the root filesystem")
}
