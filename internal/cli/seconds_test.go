package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Durations take units everywhere (and bare seconds still); a sandbox created without --ttl
// expires in an hour, --ttl 0 never.
func TestDurationsWithUnitsAndDefaultTTL(t *testing.T) {
	fake := newFake(t)
	create := func(args ...string) bayapi.SandboxResponse {
		t.Helper()
		r := run(t, fake.URL, "", append([]string{"sandbox", "create", "-o", "json"}, args...)...)
		var sb bayapi.SandboxResponse
		if err := json.Unmarshal([]byte(r.stdout), &sb); r.code != 0 || err != nil {
			t.Fatalf("create %v: %+v", args, r)
		}
		return sb
	}
	lifetime := func(sb bayapi.SandboxResponse) time.Duration {
		if sb.ExpiresAt == nil {
			return 0
		}
		return sb.ExpiresAt.Time.Sub(sb.CreatedAt.Time).Round(time.Second)
	}
	if got := lifetime(create()); got != time.Hour {
		t.Errorf("default TTL = %v, want 1h", got)
	}
	if sb := create("--ttl", "0"); sb.ExpiresAt != nil {
		t.Errorf("--ttl 0 expires at %v, want never", sb.ExpiresAt)
	}
	if got := lifetime(create("--ttl", "1h30m")); got != 90*time.Minute {
		t.Errorf("--ttl 1h30m = %v", got)
	}
	sb := create("--ttl", "600")
	if got := lifetime(sb); got != 10*time.Minute {
		t.Errorf("--ttl 600 = %v", got)
	}
	r := run(t, fake.URL, "", "sandbox", "extend", sb.ID, "5m", "-o", "json")
	var ext bayapi.SandboxResponse
	if json.Unmarshal([]byte(r.stdout), &ext); r.code != 0 || !ext.ExpiresAt.Time.Equal(sb.ExpiresAt.Time.Add(5*time.Minute)) {
		t.Errorf("extend 5m: %+v", r)
	}
	for _, bad := range [][]string{{"sandbox", "create", "--ttl", "1.5s"}, {"sandbox", "create", "--ttl", "-1h"},
		{"sandbox", "create", "--ttl", "soon"}, {"sandbox", "create", "--ttl", "9000h"}, {"sandbox", "extend", sb.ID, "tomorrow"}} {
		if r := run(t, fake.URL, "", bad...); r.code != 64 || !strings.Contains(r.stderr, "Error:") {
			t.Errorf("%v: %+v, want usage error 64", bad, r)
		}
	}
}
