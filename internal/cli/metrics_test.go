package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// `shipyard sandbox metrics` against the real bay: the use of a running sandbox, read from
// the engine, its cargo measured in the container.
func TestSandboxMetricsCLI(t *testing.T) {
	url := startRealBay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := sdk.New(url, realAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sh, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: "head -c 2000000 /dev/urandom > blob"}); err != nil || sh.ExitCode != 0 {
		t.Fatalf("write blob: %+v %v", sh, err)
	}
	r := run(t, url, "", "--token", realAPIKey, "sandbox", "metrics", sb.ID)
	if r.code != 0 || !strings.HasPrefix(r.stdout, sb.ID+" ready\n") ||
		!regexp.MustCompile(`(?m)^primary +[0-9.]+s \(limit 1 cores\) +[0-9.]+ MiB / 1\.0 GiB +[0-9]+ / [0-9]+$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^disk: [0-9.]+ MiB of 1\.0 GiB$`).MatchString(r.stdout) {
		t.Fatalf("sandbox metrics:\n%s%s", r.stdout, r.stderr)
	}
	r = run(t, url, "", "--token", realAPIKey, "sandbox", "metrics", sb.ID, "-o", "json")
	var m bayapi.SandboxMetrics
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.Disk.UsedBytes == nil || *m.Disk.UsedBytes < 2_000_000 || len(m.Containers) != 1 {
		t.Fatalf("sandbox metrics json: %v %s", err, r.stdout)
	}
	if r := run(t, url, "", "--token", realAPIKey, "sandbox", "metrics", "sandbox-000000000000"); r.code != 66 {
		t.Errorf("metrics of a missing sandbox: %+v, want exit 66", r)
	}
}
