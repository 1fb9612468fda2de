//go:build k8s

// Package k8se2e runs the end-to-end scenarios against bay with `driver.type: k8s` on the
// project's real single-node cluster (scripts/k8s, `make k8s-up`): the real bay binary as a
// process of the test (SQLite, the admin kubeconfig, runtimes reached by Pod IP), the sandbox
// image copied into the node's containerd, and HTTP calls as a client makes them through the
// Go SDK. A missing cluster fails, never skips.
package k8se2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
	"github.com/shipyard-dev/shipyard/sdk"
)

const apiKey = "sk-k8se2e-0123456789abcdef"

// image is the sandboxes' image: ship:base (copied to the node by `make k8s-up`), or
// SHIPYARD_E2E_IMAGE.
var image = cmpOr(os.Getenv("SHIPYARD_E2E_IMAGE"), "ship:base")

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var bayBin string

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	bin, remove, err := testenv.BuildBay(filepath.Dir(filepath.Dir(filepath.Dir(file))))
	if err != nil {
		fmt.Fprintf(os.Stderr, "k8se2e: %v\n", err)
		os.Exit(1)
	}
	bayBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// startBay runs bay on the cluster's namespace ns and returns a client of it; profiles are
// YAML list entries added after python-default.
func startBay(t testing.TB, env *k8stest.Env, ns, profiles string) *sdk.Client {
	t.Helper()
	c, _ := runBay(t, func(dir string, port int) string {
		return bayConfig(env, ns, dir, port, "", "", defaultProfiles+profiles)
	})
	return c
}

// defaultProfiles is the profile the scenarios use.
var defaultProfiles = fmt.Sprintf(`  - id: python-default
    image: %q
    resources: {cpus: 1.0, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
`, image)

// bayConfig is bay's configuration on namespace ns with extra keys of driver.k8s and of
// security (each indented as a key of its block) and the profiles.
func bayConfig(env *k8stest.Env, ns, dir string, port int, k8sExtra, securityExtra, profiles string) string {
	return fmt.Sprintf(`server: {host: "127.0.0.1", port: %d}
database: {url: "sqlite:///%s/bay.db"}
driver:
  type: k8s
  image_pull_policy: never
  k8s:
    namespace: %q
    kubeconfig: %q
    storage_class: %q
    default_storage_size: 256Mi
    pod_startup_timeout: 120
    connect_mode: pod_ip
    network_policy: true
    runtime_caps: {ship: [SETUID, SETGID, KILL]}
%ssecurity:
  api_key: %q
  allow_anonymous: false
%sgc: {enabled: false, run_on_startup: false, instance_id: %q}
profiles:
%s`, port, dir, ns, env.Kubeconfig, k8stest.StorageClass, k8sExtra, apiKey, securityExtra, "k8se2e-"+ns, profiles)
}

// runBay runs bay with the configuration config returns for its directory and port, and
// returns a client of it and its base URL.
func runBay(t testing.TB, config func(dir string, port int) string) (*sdk.Client, string) {
	t.Helper()
	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(dir, port)
	logs := &testenv.LogBuffer{}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p, err := testenv.StartBay(ctx, testenv.BayOptions{Binary: bayBin, Dir: dir, Config: cfg, URL: url, Log: logs})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		p.Stop(20 * time.Second)
		if t.Failed() {
			t.Logf("bay's log:\n%s", logs.String())
		}
	})
	c, err := sdk.New(url, apiKey, sdk.WithTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return c, url
}

// objects counts the driver's objects in ns by kind: of one sandbox (its instance's Pod, Secret
// and NetworkPolicy carry its id, its cargo's claim the cargo's), or all of them for nil.
func objects(t *testing.T, env *k8stest.Env, ns string, sb *sdk.Sandbox) map[string]int {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shipyard-bay"}
	claimSel := sel
	if sb != nil {
		sel.LabelSelector += ",bay.sandbox_id=" + sb.ID
		claimSel.LabelSelector += ",bay.cargo_id=" + sb.CargoID
	}
	ctx := t.Context()
	cs := env.Clientset
	n := map[string]int{}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	n["pods"] = len(pods.Items)
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, claimSel)
	if err != nil {
		t.Fatal(err)
	}
	n["claims"] = len(pvcs.Items)
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	n["secrets"] = len(secrets.Items)
	pols, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	n["policies"] = len(pols.Items)
	return n
}

// waitObjects waits until cond holds for the sandbox's objects.
func waitObjects(t *testing.T, env *k8stest.Env, ns string, sb *sdk.Sandbox, what string, cond func(map[string]int) bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := objects(t, env, ns, sb)
		if cond(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: objects are %v after 90 s", what, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestScenariosOnKubernetes: a sandbox's whole life on the cluster. Create is lazy (no Pod);
// the first exec starts one Pod with its claim, Secret and NetworkPolicy; Python keeps state
// between calls, shell runs as uid 1000, files go both ways (text and binary); stop removes
// the Pod and keeps the claim, and after the resume the variables are gone and the files are
// there; delete removes every object of the sandbox and leaves nothing of the driver behind.
func TestScenariosOnKubernetes(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "shipyard-k8se2e")
	env.ImportImage(t, image)
	c := startBay(t, env, ns, "")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.WithoutCancel(ctx)) })
	if sb.Status != "idle" {
		t.Fatalf("new sandbox status %q, want idle", sb.Status)
	}
	if n := objects(t, env, ns, sb); n["pods"] != 0 {
		t.Fatalf("lazy create started %v", n)
	}

	t0 := time.Now()
	py, err := sb.Python(ctx, "x = 21\nprint(x * 2)")
	if err != nil || !py.Success || strings.TrimSpace(py.Output) != "42" {
		t.Fatalf("python: %+v %v", py, err)
	}
	t.Logf("first exec (Pod start on the cluster) %v", time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	if py, err := sb.Python(ctx, "print(x + 1)"); err != nil || strings.TrimSpace(py.Output) != "22" {
		t.Fatalf("python keeps state: %+v %v", py, err)
	}
	t.Logf("warm python exec %v", time.Since(t1).Round(time.Millisecond))
	if n := objects(t, env, ns, sb); n["pods"] != 1 || n["claims"] != 1 || n["secrets"] != 1 || n["policies"] != 1 {
		t.Fatalf("a started sandbox has %v, want one Pod, claim, Secret and NetworkPolicy", n)
	}
	if sh, err := sb.Shell(ctx, "id -u && pwd"); err != nil || !sh.Success || strings.Join(strings.Fields(sh.Output), " ") != "1000 /workspace" {
		t.Fatalf("shell: %+v %v", sh, err)
	}
	if err := sb.WriteFile(ctx, "notes/a.txt", "kept on the claim"); err != nil {
		t.Fatal(err)
	}
	blob := bytes.Repeat([]byte{0, 1, 2, 255}, 64<<10)
	if _, err := sb.Upload(ctx, "data.bin", bytes.NewReader(blob), int64(len(blob))); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if sh, err := sb.Shell(ctx, "sha256sum data.bin | cut -c1-16; cat notes/a.txt"); err != nil || !strings.HasSuffix(sh.Output, "kept on the claim") {
		t.Fatalf("files seen from the shell: %+v %v", sh, err)
	}

	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	waitObjects(t, env, ns, sb, "after stop", func(n map[string]int) bool { return n["pods"] == 0 && n["claims"] == 1 })
	py, err = sb.Python(ctx, "print(x)")
	if err != nil || py.Success || !strings.Contains(py.Error, "NameError") {
		t.Fatalf("after resume x must be gone: %+v %v", py, err)
	}
	if got, err := sb.ReadFile(ctx, "notes/a.txt"); err != nil || got != "kept on the claim" {
		t.Fatalf("file after stop/resume: %q %v", got, err)
	}
	var back bytes.Buffer
	if _, err := sb.Download(ctx, "data.bin", &back); err != nil || !bytes.Equal(back.Bytes(), blob) {
		t.Fatalf("download after resume: %d bytes, %v", back.Len(), err)
	}

	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); !sdk.IsNotFound(err) {
		t.Fatalf("get after delete: want not_found, got %v", err)
	}
	waitObjects(t, env, ns, nil, "after delete", func(n map[string]int) bool {
		return n["pods"] == 0 && n["claims"] == 0 && n["secrets"] == 0 && n["policies"] == 0
	})
}
