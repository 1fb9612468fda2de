package compose_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/deploy/deploytest"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/sdk"
)

// sandboxImage is the profile image of the test's sandboxes: ship:base (`make image-base`), or
// SHIPYARD_E2E_IMAGE.
var sandboxImage = cmp(os.Getenv("SHIPYARD_E2E_IMAGE"), "ship:base")

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestComposeFile validates deploy/compose and then runs it: docker-compose starts bay from
// its own image against this machine's engine with the shipped config.yaml (plus a profile on
// the test's sandbox image), deploytest.Smoke passes through it, and `down -v` leaves
// nothing.
func TestComposeFile(t *testing.T) {
	root := deploytest.RepoRoot(t)
	dir := filepath.Join(root, "deploy", "compose")
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatalf("docker-compose is not installed (apt-get install docker-compose): %v", err)
	}
	cli, err := testenv.EngineClient(t.Context(), sandboxImage)
	if err != nil {
		t.Fatalf("the compose test needs the Docker engine and %s: %v", sandboxImage, err)
	}
	defer cli.Close()

	var rnd [4]byte
	rand.Read(rnd[:])
	project := "shipyard-test-compose-" + hex.EncodeToString(rnd[:])
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	key := "sk-compose-" + hex.EncodeToString(rnd[:]) + "0123456789"
	shipped, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	profile := fmt.Sprintf("profiles:\n  - id: python-default\n    image: %q\n    resources: {cpus: 1.0, memory: \"512m\"}\n    capabilities: [filesystem, shell, python]\n    idle_timeout: 600\n", sandboxImage)
	if err := os.WriteFile(cfg, append(shipped, profile...), 0o644); err != nil {
		t.Fatal(err)
	}

	compose := func(ctx context.Context, env []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker-compose", append([]string{"-p", project, "-f", filepath.Join(dir, "docker-compose.yml")}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Without an API key the file refuses to start bay.
	if out, err := compose(t.Context(), []string{"BAY_API_KEY="}, "config"); err == nil || !strings.Contains(out, "BAY_API_KEY") {
		t.Fatalf("compose config without BAY_API_KEY: want an error naming it, got %v: %s", err, out)
	}

	image := deploytest.BayImage(t)
	env := []string{"BAY_IMAGE=" + image, "BAY_API_KEY=" + key, fmt.Sprintf("BAY_PORT=%d", port),
		"BAY_INSTANCE_ID=" + project, "BAY_CONFIG=" + cfg}
	if out, err := compose(t.Context(), env, "config", "-q"); err != nil {
		t.Fatalf("docker-compose config: %v: %s", err, out)
	}

	restoreFirewall := testenv.KeepHostFirewallAsFound()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := compose(ctx, env, "logs", "--no-color", "--tail", "80")
			t.Logf("bay's log:\n%s", out)
		}
		if out, err := compose(ctx, env, "down", "-v", "--timeout", "30"); err != nil {
			t.Errorf("docker-compose down: %v: %s", err, out)
		}
		restoreFirewall()
		left, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "com.docker.compose.project="+project)})
		if err == nil && len(left.Items) > 0 {
			t.Errorf("down left %d containers of project %s", len(left.Items), project)
		}
	})
	start := time.Now()
	if out, err := compose(t.Context(), env, "up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v: %s", err, out)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealthy(t, url, 90*time.Second)
	t.Logf("compose: bay healthy %v after up", time.Since(start).Round(time.Millisecond))

	// The container runs as the file says: root with NET_ADMIN alone, read-only, no new
	// privileges, the host's network.
	cs, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", "com.docker.compose.project="+project)})
	if err != nil || len(cs.Items) != 1 {
		t.Fatalf("compose project containers: %v %v", cs.Items, err)
	}
	in, err := cli.ContainerInspect(t.Context(), cs.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if !hc.ReadonlyRootfs || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || string(hc.NetworkMode) != "host" ||
		!slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.CapAdd, []string{"NET_ADMIN"}) || hc.PidsLimit == nil || *hc.PidsLimit != 1024 {
		t.Errorf("bay's container is not hardened as the file says: %+v", hc)
	}

	c, err := sdk.New(url, key, sdk.WithTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cold, rest := deploytest.Smoke(t, c)
	t.Logf("compose smoke: create + first python exec %v; shell, write, read, delete %v", cold.Round(time.Millisecond), rest.Round(time.Millisecond))
	left, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "bay.instance_id="+project)})
	if err != nil || len(left.Items) != 0 {
		t.Fatalf("the smoke test left %d sandbox containers (%v)", len(left.Items), err)
	}
}

func waitHealthy(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("bay did not answer %s/health within %v: %v", url, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
