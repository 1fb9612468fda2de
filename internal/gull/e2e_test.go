package gull_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/imagebuild"
)

// e2ePidsLimit is the pids limit the test gives the container (Chromium's
// processes and threads count against it).
const e2ePidsLimit = 512

// TestGullImageEndToEnd runs the gull image on the real Docker engine,
// hardened as a sandbox (uid 1000, no capabilities, no-new-privileges, a
// pids and memory limit, a volume at /workspace, the port published on
// 127.0.0.1 only), and drives a page served by the test on the gateway
// address of a network the test creates: open, snapshot -i, fill, click,
// get title, screenshot; the PNG is read back from the volume.
func TestGullImageEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer cli.Close()

	root := repoRoot()
	bin := t.TempDir() + "/gull"
	if err := imagebuild.BuildDaemon(ctx, root, "gull", bin); err != nil {
		t.Fatal(err)
	}
	img, err := imagebuild.EnsureImage(ctx, imagebuild.Options{Flavour: imagebuild.FlavourGull, ShipBinary: bin,
		Engine: cli, Progress: t.Output(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("gull image: %v", err)
	}

	var rnd [4]byte
	rand.Read(rnd[:])
	name := "shipyard-test-gull-" + hex.EncodeToString(rnd[:])
	labels := map[string]string{"shipyard.test": "1"}
	cleanup := func(f func(ctx context.Context) error, what string) {
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer ccancel()
			if err := f(cctx); err != nil {
				t.Errorf("remove %s: %v", what, err)
			}
		})
	}

	// A network of the test's own: its gateway is an address of this
	// machine that the container reaches.
	nres, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	cleanup(func(ctx context.Context) error {
		_, err := cli.NetworkRemove(ctx, nres.ID, client.NetworkRemoveOptions{})
		return err
	}, "network")
	ninfo, err := cli.NetworkInspect(ctx, nres.ID, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gw string
	for _, c := range ninfo.Network.IPAM.Config {
		if c.Gateway.IsValid() && c.Gateway.Is4() {
			gw = c.Gateway.String()
		}
	}
	if gw == "" {
		t.Fatalf("network %s has no IPv4 gateway: %+v", name, ninfo.Network.IPAM)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the gateway %s: %v", gw, err)
	}
	site := httptest.NewUnstartedServer(testSite(t).Config.Handler)
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	defer site.Close()

	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: labels}); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	cleanup(func(ctx context.Context) error {
		_, err := cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
		return err
	}, "volume")

	port, _ := network.PortFrom(gullapi.DefaultPort, network.TCP)
	pids := int64(e2ePidsLimit)
	noInit := false
	token := "e2e-" + hex.EncodeToString(rnd[:])
	cres, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: img.ContentTag, User: "1000:1000", Labels: labels,
			Env:          []string{gullapi.EnvAuthToken + "=" + token, "SANDBOX_ID=e2e-sandbox"},
			ExposedPorts: network.PortSet{port: {}},
		},
		HostConfig: &container.HostConfig{
			CapDrop:      []string{"ALL"},
			SecurityOpt:  []string{"no-new-privileges:true"},
			Init:         &noInit,
			NetworkMode:  container.NetworkMode(nres.ID),
			Resources:    container.Resources{PidsLimit: &pids, Memory: 1 << 30, MemorySwap: 1 << 30},
			Mounts:       []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: gullapi.DefaultWorkspace}},
			PortBindings: network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: ""}}},
		},
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	cleanup(func(ctx context.Context) error {
		_, err := cli.ContainerRemove(ctx, cres.ID, client.ContainerRemoveOptions{Force: true})
		return err
	}, "container")
	if _, err := cli.ContainerStart(ctx, cres.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	ins, err := cli.ContainerInspect(ctx, cres.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hostPort string
	for _, b := range ins.Container.NetworkSettings.Ports[port] {
		hostPort = b.HostPort
	}
	if hostPort == "" {
		t.Fatalf("no published port: %+v", ins.Container.NetworkSettings.Ports)
	}
	d := &daemon{t: t, url: "http://127.0.0.1:" + hostPort, token: token}
	defer func() {
		if t.Failed() {
			logs, err := cli.ContainerLogs(context.WithoutCancel(ctx), cres.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "60"})
			if err == nil {
				b, _ := io.ReadAll(logs)
				logs.Close()
				t.Logf("container logs:\n%s", b)
			}
		}
	}()
	waitUp(t, d.url)
	t0 := time.Now()
	h := d.waitHealth(func(h gullapi.HealthResponse) bool { return h.BrowserReady }, "browser_ready")
	if h.Status != "healthy" || h.Session != "e2e-sandbox" {
		t.Errorf("health: %+v", h)
	}
	t.Logf("browser ready %v after the API answered", time.Since(t0).Round(time.Millisecond))

	out := d.exec("open " + site.URL + "/login")
	if !strings.HasPrefix(out, "Login\n") {
		t.Errorf("open: %q", out)
	}
	snap := d.exec("snapshot -i")
	d.exec("fill " + refOf(t, snap, `textbox "User"`) + " 'Grace Hopper'")
	d.exec("click " + refOf(t, snap, `button "Sign in"`))
	if v := d.exec("get title"); v != "Welcome\n" {
		t.Errorf("title: %q", v)
	}
	if v := d.exec("get text #msg"); !strings.HasPrefix(v, "Hello Grace Hopper") {
		t.Errorf("text: %q", v)
	}
	if v := d.exec("screenshot shots/e2e.png"); v != "Screenshot saved to /workspace/shots/e2e.png\n" {
		t.Errorf("screenshot: %q", v)
	}
	if v := d.exec("--version"); !strings.Contains(v, "agent-browser") {
		t.Errorf("--version: %q", v)
	}
	// CJK text renders with the image's fonts (no tofu boxes: the glyphs
	// have a width).
	if v := d.exec(`eval "(() => { const s = document.createElement('span'); s.textContent = '漢字かな'; document.body.append(s); return s.getBoundingClientRect().width > 20 })()"`); v != "true\n" {
		t.Errorf("CJK text width: %q", v)
	}
	// The skill was installed into the volume.
	if _, err := cli.CopyFromContainer(ctx, cres.ID, client.CopyFromContainerOptions{SourcePath: "/workspace/skills/browser-automation/SKILL.md"}); err != nil {
		t.Errorf("skill not in the workspace: %v", err)
	}

	// The screenshot is in the volume, a PNG of the viewport, owned by 1000.
	cp, err := cli.CopyFromContainer(ctx, cres.ID, client.CopyFromContainerOptions{SourcePath: "/workspace/shots/e2e.png"})
	if err != nil {
		t.Fatalf("copy the screenshot out: %v", err)
	}
	tr := tar.NewReader(cp.Content)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Uid != 1000 {
		t.Errorf("screenshot owned by uid %d, want 1000", hdr.Uid)
	}
	data, _ := io.ReadAll(tr)
	cp.Content.Close()
	im, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := im.Bounds(); b.Dx() != 1280 || b.Dy() != 720 {
		t.Errorf("screenshot %dx%d", b.Dx(), b.Dy())
	}

	// How much of the pids budget Chromium uses with one page, then four.
	pidsInUse := func(what string) {
		st, err := cli.ContainerStats(ctx, cres.ID, client.ContainerStatsOptions{Stream: false})
		if err != nil {
			t.Errorf("stats: %v", err)
			return
		}
		var s container.StatsResponse
		json.NewDecoder(st.Body).Decode(&s)
		st.Body.Close()
		t.Logf("container with %s: %d pids/threads of %d, memory %d MiB", what, s.PidsStats.Current, e2ePidsLimit, s.MemoryStats.Usage>>20)
		if s.PidsStats.Current == 0 || s.PidsStats.Current > e2ePidsLimit*3/4 {
			t.Errorf("pids in use: %d", s.PidsStats.Current)
		}
	}
	pidsInUse("one page")
	for range 3 {
		d.exec("tab new " + site.URL + "/login")
	}
	pidsInUse("four pages")

	// A graceful stop: gull closes Chromium and exits 0.
	stopT := 10
	if _, err := cli.ContainerStop(ctx, cres.ID, client.ContainerStopOptions{Timeout: &stopT}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	ins, err = cli.ContainerInspect(ctx, cres.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Container.State.ExitCode != 0 {
		t.Errorf("gull exited %d on SIGTERM", ins.Container.State.ExitCode)
	}
}

// waitUp waits until the API answers at all.
func waitUp(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	// A connection that is accepted and never answered must not hold the
	// loop past its deadline either.
	cl := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := cl.Get(url + gullapi.PathHealth)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gull did not answer at %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
