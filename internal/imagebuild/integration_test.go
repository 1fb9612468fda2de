package imagebuild

// Integration tests against the real Docker engine. They build the images once
// per machine (EnsureImage: an image with the same content tag is reused, so
// later runs take seconds) and run containers the way Bay does: user
// 1000:1000, all capabilities dropped, no-new-privileges, no network, a fresh
// named volume at /workspace. A missing engine fails them; `go test -short`
// skips them.
//
// The ship binary is built from ./cmd/ship (CGO_ENABLED=0, like `make build`);
// while cmd/ship has no Go files a stand-in (testdata/fakeship) answers
// /health. SHIPYARD_SHIP_BINARY=path overrides both.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

var (
	shared struct {
		once    sync.Once
		dir     string
		err     error
		engine  *client.Client
		ship    string
		fake    bool
		buildMu sync.Mutex
		images  map[Flavour]Result
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	if shared.engine != nil {
		shared.engine.Close()
	}
	os.Exit(code)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// setup connects to the engine and builds the ship binary, once per test
// binary.
func setup(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the Docker engine and the Debian archive (or built images)")
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.images = map[Flavour]Result{}
		shared.engine, shared.err = NewEngine(ctx)
		if shared.err != nil {
			return
		}
		shared.dir, shared.err = os.MkdirTemp("", "shipyard-imagebuild-test-")
		if shared.err != nil {
			return
		}
		shared.ship, shared.fake, shared.err = buildShip(ctx, repoRoot(t), shared.dir)
	})
	if shared.err != nil {
		t.Fatalf("integration setup: %v", shared.err)
	}
	if shared.fake {
		t.Log("NOTE: cmd/ship has no Go files yet; using the stand-in testdata/fakeship for /health")
	}
}

func buildShip(ctx context.Context, root, dir string) (path string, fake bool, err error) {
	if p := os.Getenv("SHIPYARD_SHIP_BINARY"); p != "" {
		return p, false, nil
	}
	out := filepath.Join(dir, "ship")
	if matches, _ := filepath.Glob(filepath.Join(root, "cmd", "ship", "*.go")); len(matches) > 0 {
		return out, false, BuildShip(ctx, root, out)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./internal/imagebuild/testdata/fakeship")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("build fakeship: %w\n%s", err, b)
	}
	return out, true, nil
}

// testImage returns the image of a flavour, building it if needed (once per
// test binary; across binaries and runs the content tag does the caching).
func testImage(t *testing.T, f Flavour) Result {
	t.Helper()
	setup(t)
	shared.buildMu.Lock()
	defer shared.buildMu.Unlock()
	if r, ok := shared.images[f]; ok {
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := EnsureImage(ctx, Options{Flavour: f, ShipBinary: shared.ship, Engine: shared.engine, Progress: t.Output()})
	if err != nil {
		t.Fatalf("EnsureImage(%s): %v", f, err)
	}
	t.Logf("%s image: %s (%s) cached=%v rootfs cached=%v in %s", f, r.ContentTag, humanBytes(r.Size), r.Cached, r.RootfsCached, r.Duration.Round(time.Millisecond))
	shared.images[f] = r
	return r
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// cleanupCtx is for deferred cleanups: it survives the test's end.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(context.Background()), time.Minute)
}

type sandbox struct {
	t  *testing.T
	e  *client.Client
	id string
}

// startSandbox runs image hardened like a Bay sandbox with a fresh named
// volume at /workspace.
func startSandbox(t *testing.T, image string) *sandbox {
	t.Helper()
	pids, mem := int64(256), int64(2<<30)
	return runSandbox(t, image, &container.Config{User: "1000:1000"}, &container.HostConfig{
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		NetworkMode: "none",
		Resources:   container.Resources{PidsLimit: &pids, Memory: mem},
	})
}

// runSandbox creates and starts a container of image with cfg and hc, a fresh named volume at
// /workspace and the test label, all removed when the test ends.
func runSandbox(t *testing.T, image string, cfg *container.Config, hc *container.HostConfig) *sandbox {
	t.Helper()
	e := shared.engine
	ctx := t.Context()
	labels := map[string]string{"dev.shipyard.test": "imagebuild"}
	vol := randomName("shipyard-imagetest-")
	if _, err := e.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: labels}); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := e.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove volume %s: %v", vol, err)
		}
	})
	cfg.Labels = labels
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: vol, Target: "/workspace"})
	c, err := e.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: randomName("shipyard-imagetest-"), Image: image, Config: cfg, HostConfig: hc,
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := e.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("remove container: %v", err)
		}
	})
	if _, err := e.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	return &sandbox{t: t, e: e, id: c.ID}
}

type execResult struct {
	stdout, stderr string
	code           int
}

// exec runs a command in the sandbox as its default user (1000:1000).
func (s *sandbox) exec(cmd ...string) execResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	x, err := s.e.ExecCreate(ctx, s.id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		s.t.Fatalf("exec create %q: %v", cmd, err)
	}
	att, err := s.e.ExecAttach(ctx, x.ID, client.ExecAttachOptions{})
	if err != nil {
		s.t.Fatalf("exec attach %q: %v", cmd, err)
	}
	defer att.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil {
		s.t.Fatalf("exec %q: read output: %v", cmd, err)
	}
	ins, err := s.e.ExecInspect(ctx, x.ID, client.ExecInspectOptions{})
	if err != nil {
		s.t.Fatalf("exec inspect %q: %v", cmd, err)
	}
	return execResult{stdout: out.String(), stderr: errb.String(), code: ins.ExitCode}
}

// ok runs a command that must succeed and returns its trimmed stdout.
func (s *sandbox) ok(cmd ...string) string {
	s.t.Helper()
	r := s.exec(cmd...)
	if r.code != 0 {
		s.t.Fatalf("%q: exit %d\nstdout: %s\nstderr: %s", cmd, r.code, r.stdout, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

func (s *sandbox) logs() string {
	ctx, cancel := cleanupCtx()
	defer cancel()
	rc, err := s.e.ContainerLogs(ctx, s.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "2000"})
	if err != nil {
		return "(logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var b bytes.Buffer
	_, _ = stdcopy.StdCopy(&b, &b, rc)
	return crashOrTail(b.String())
}

// crashOrTail keeps what explains a failure: a Go crash report's first lines (the
// goroutine dump after them is long and rarely the point), else the last 50 lines.
func crashOrTail(logs string) string {
	for _, mark := range []string{"fatal error:", "panic:", "runtime: "} {
		if i := strings.Index(logs, mark); i >= 0 {
			end := min(len(logs), i+4000)
			return logs[max(0, i-2000):end]
		}
	}
	lines := strings.Split(logs, "\n")
	return strings.Join(lines[max(0, len(lines)-50):], "\n")
}

// waitHealthy polls ship's /health from inside the container (the sandbox
// has no network, loopback works).
func (s *sandbox) waitHealthy(timeout time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := s.exec("curl", "-fsS", "--max-time", "2", fmt.Sprintf("http://127.0.0.1:%d/health", ShipPort))
		if r.code == 0 {
			return strings.TrimSpace(r.stdout)
		}
		ins, err := s.e.ContainerInspect(s.t.Context(), s.id, client.ContainerInspectOptions{})
		if err == nil && ins.Container.State != nil && !ins.Container.State.Running {
			s.t.Fatalf("ship exited (code %d) before answering /health; logs:\n%s", ins.Container.State.ExitCode, s.logs())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ship did not answer /health within %s: %s%s\nlogs:\n%s", timeout, r.stdout, r.stderr, s.logs())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkCommon checks what both flavours guarantee.
func checkCommon(t *testing.T, img Result) *sandbox {
	ctx := t.Context()
	ins, err := shared.engine.ImageInspect(ctx, img.ContentTag)
	if err != nil {
		t.Fatalf("inspect %s: %v", img.ContentTag, err)
	}
	cfg := ins.Config
	if cfg == nil {
		t.Fatal("image has no config")
	}
	if cfg.User != "1000:1000" || cfg.WorkingDir != "/workspace" {
		t.Errorf("user %q workdir %q", cfg.User, cfg.WorkingDir)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/bin/tini", "--"}) || !slices.Equal(cfg.Cmd, []string{"/usr/local/bin/ship"}) {
		t.Errorf("entrypoint %q cmd %q", cfg.Entrypoint, cfg.Cmd)
	}
	if _, ok := cfg.ExposedPorts["8123/tcp"]; !ok {
		t.Errorf("exposed ports %v", cfg.ExposedPorts)
	}
	for _, env := range []string{"LANG=C.UTF-8", "HOME=/workspace", "SHIP_IMAGE=" + img.ContentTag, "SHIP_SANDBOX_USER=1000:1000"} {
		if !slices.Contains(cfg.Env, env) {
			t.Errorf("env lacks %s: %q", env, cfg.Env)
		}
	}
	if cfg.Labels[LabelContentTag] != img.ContentTag || cfg.Labels[LabelRecipeHash] == "" || cfg.Labels[LabelShipSHA256] == "" {
		t.Errorf("labels %v", cfg.Labels)
	}
	if !slices.Contains(ins.RepoTags, img.Tag) {
		t.Errorf("friendly tag %s does not point at %s (tags %q)", img.Tag, img.ContentTag, ins.RepoTags)
	}

	s := startSandbox(t, img.ContentTag)
	health := s.waitHealthy(30 * time.Second)
	if !strings.Contains(health, `"status"`) || !strings.Contains(health, "healthy") {
		t.Errorf("/health = %s", health)
	}
	if got := s.ok("id"); got != "uid=1000(shipyard) gid=1000(shipyard) groups=1000(shipyard)" {
		t.Errorf("id = %q", got)
	}
	if got := s.ok("getent", "passwd", "ship"); got != "ship:x:999:999::/nonexistent:/usr/sbin/nologin" {
		t.Errorf("ship's system user: %q", got)
	}
	if got := s.ok("cat", "/proc/1/comm"); got != "tini" {
		t.Errorf("pid 1 is %q, want tini", got)
	}
	if got := s.ok("python3", "--version"); !strings.HasPrefix(got, "Python 3.13") {
		t.Errorf("python3 --version = %q", got)
	}
	s.ok("python3", "-c", "import ipykernel, jupyter_client, zmq")
	// The hot paths must exist and hold the modules a kernel imports, or the driver's image
	// cache would mount empty volumes over nothing useful.
	hot := strings.Split(cfg.Labels[LabelHotPaths], ",")
	if len(hot) < 2 {
		t.Errorf("hot paths label %q", cfg.Labels[LabelHotPaths])
	}
	for _, p := range hot {
		if r := s.exec("test", "-d", p); r.code != 0 {
			t.Errorf("hot path %s is not a directory in the image", p)
		}
	}
	if got := s.ok("python3", "-c", "import ipykernel, json; print(ipykernel.__file__); print(json.__file__)"); !strings.Contains(got, hot[0]+"/") || !strings.Contains(got, hot[1]+"/") {
		t.Errorf("a kernel imports from %q, not from the hot paths %q", got, hot)
	}
	if got := s.ok("sh", "-c", "echo $HOME $LANG; pwd"); got != "/workspace C.UTF-8\n/workspace" {
		t.Errorf("home/lang/pwd = %q", got)
	}
	if got := s.ok("stat", "-c", "%u:%g %a", "/workspace", "/tmp"); got != "1000:1000 755\n0:0 1777" {
		t.Errorf("stat /workspace /tmp = %q", got)
	}
	s.ok("sh", "-c", "echo hi > /workspace/probe && mkdir -p /workspace/a/b && test -w /workspace/a/b && test -w /tmp")
	for _, p := range []string{"/etc/probe", "/usr/probe", "/opt/shipyard/skills/probe"} {
		if r := s.exec("touch", p); r.code == 0 {
			t.Errorf("%s is writable for the sandbox user", p)
		}
	}
	if r := s.exec("sh", "-c", "command -v sudo"); r.code == 0 {
		t.Errorf("sudo is installed: %s", r.stdout)
	}
	skill := s.ok("head", "-3", "/opt/shipyard/skills/python-sandbox/SKILL.md")
	if !strings.Contains(skill, "name: python-sandbox") {
		t.Errorf("built-in skill: %q", skill)
	}
	if got := s.ok("readlink", "-f", "/usr/local/bin/ship"); got != "/opt/shipyard/bin/ship" {
		t.Errorf("ship is at %q", got)
	}
	s.ok("git", "--version")
	s.ok("curl", "--version")
	s.ok("ps", "-e")
	return s
}

func TestImageBase(t *testing.T) {
	img := testImage(t, FlavourBase)
	if img.Tag != "ship:base" {
		t.Errorf("tag %s", img.Tag)
	}
	checkCommon(t, img)
}

func TestImageFull(t *testing.T) {
	img := testImage(t, FlavourFull)
	if img.Tag != "ship:latest" {
		t.Errorf("tag %s", img.Tag)
	}
	s := checkCommon(t, img)

	t.Run("python libraries", func(t *testing.T) {
		s.ok("python3", "-c", `import numpy, pandas, scipy, sklearn, PIL, cv2, pdfminer, pypdf, fitz, reportlab, docx, openpyxl, bs4, lxml, requests
print(pandas.DataFrame({"a": [1, 2]}).sum().a)`)
	})
	t.Run("matplotlib", func(t *testing.T) {
		start := time.Now()
		r := s.exec("python3", "-c", `import matplotlib, matplotlib.pyplot as plt
from matplotlib import font_manager
cjk = font_manager.findfont("Noto Sans CJK JP", fallback_to_default=False)
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [2, 1, 3])
ax.set_title("销售额 / 売上 / 매출")
fig.savefig("/workspace/fig.png")
print(matplotlib.get_backend(), matplotlib.get_cachedir(), plt.rcParams["font.sans-serif"][0], cjk)`)
		elapsed := time.Since(start)
		if r.code != 0 {
			t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		fields := strings.Fields(r.stdout)
		if len(fields) < 4 || !strings.EqualFold(fields[0], "agg") || fields[1] != "/opt/shipyard/mplconfig" || !strings.Contains(r.stdout, "Noto Sans CJK JP /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc") {
			t.Errorf("matplotlib: %q", r.stdout)
		}
		if strings.Contains(r.stderr, "font cache") || strings.Contains(r.stderr, "missing from") || strings.Contains(r.stderr, "not a writable") || strings.Contains(r.stderr, "not found") {
			t.Errorf("matplotlib warnings (font cache not prebuilt or CJK glyphs missing):\n%s", r.stderr)
		}
		if got := s.ok("stat", "-c", "%u %s", "/workspace/fig.png"); !strings.HasPrefix(got, "1000 ") {
			t.Errorf("figure: %q", got)
		}
		t.Logf("first plot (prebuilt font cache) took %s", elapsed.Round(time.Millisecond))
	})
	t.Run("node npm git curl", func(t *testing.T) {
		if got := s.ok("node", "-e", "console.log(process.version)"); !strings.HasPrefix(got, "v") {
			t.Errorf("node: %q", got)
		}
		s.ok("npm", "--version")
		s.ok("sh", "-c", "cd /workspace && git init -q repo && cd repo && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git log --oneline")
		s.ok("curl", "--version")
		s.ok("jq", "--version")
	})
	t.Run("venv offline", func(t *testing.T) {
		s.ok("python3", "-m", "venv", "--system-site-packages", "/workspace/.venv")
		if got := s.ok("/workspace/.venv/bin/python", "-m", "pip", "--version"); !strings.Contains(got, "/workspace/.venv") {
			t.Errorf("pip in venv: %q", got)
		}
		s.ok("/workspace/.venv/bin/python", "-c", "import pandas")
	})
}

// TestShipBinaryChangeRebuildsOnlyLastStep builds the base image with another
// ship binary: the root filesystem must be reused and only the last step run
// (ImageLoad by default, the classic builder on request); a second call must
// not build anything.
func TestShipBinaryChangeRebuildsOnlyLastStep(t *testing.T) {
	for _, classic := range []bool{false, true} {
		t.Run(map[bool]string{false: "image load", true: "classic build"}[classic], func(t *testing.T) {
			base := testImage(t, FlavourBase)
			data, err := os.ReadFile(shared.ship)
			if err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(t.TempDir(), "ship")
			// Trailing bytes change the hash, not the ELF program.
			if err := os.WriteFile(other, append(data, []byte(randomName("\x00imagetest-"))...), 0o755); err != nil {
				t.Fatal(err)
			}
			tag := randomName("ship:imagetest-")
			opts := Options{Flavour: FlavourBase, ShipBinary: other, Tag: tag, KeepOld: true, ClassicBuild: classic,
				Engine: shared.engine, Progress: t.Output()}
			contentTag := opts.contentTagForCleanup(t)
			t.Cleanup(func() {
				ctx, cancel := cleanupCtx()
				defer cancel()
				for _, ref := range []string{tag, contentTag} {
					_, err := shared.engine.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
					if err != nil && !cerrdefs.IsNotFound(err) {
						t.Errorf("remove %s: %v", ref, err)
					}
				}
			})
			r, err := Build(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Cached || !r.RootfsCached || r.RootfsTag != base.RootfsTag || r.ContentTag != contentTag || r.ContentTag == base.ContentTag {
				t.Fatalf("result %+v (base %+v)", r, base)
			}
			t.Logf("ship-only rebuild took %s", r.Duration.Round(time.Millisecond))
			again, err := EnsureImage(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Cached || again.ContentTag != r.ContentTag || again.ImageID != r.ImageID {
				t.Fatalf("second call rebuilt: %+v", again)
			}
			checkCommon(t, Result{Tag: tag, ContentTag: r.ContentTag})
		})
	}
}

// contentTagForCleanup computes the content tag of opts (the image to remove).
func (o Options) contentTagForCleanup(t *testing.T) string {
	p, err := NewPlan(o)
	if err != nil {
		t.Errorf("plan: %v", err)
		return ""
	}
	return p.ContentTag
}

func TestBuildFailures(t *testing.T) {
	setup(t)
	t.Run("mmdebstrap missing", func(t *testing.T) {
		_, err := Build(t.Context(), Options{
			Flavour: FlavourBase, ShipBinary: shared.ship, Engine: shared.engine, Force: true,
			Tag: randomName("ship:imagetest-"), Mmdebstrap: "/nonexistent/mmdebstrap", KeepOld: true,
		})
		if err == nil || !strings.Contains(err.Error(), "apt-get install mmdebstrap") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("archive unreachable", func(t *testing.T) {
		var out bytes.Buffer
		tag := randomName("ship:imagetest-")
		_, err := Build(t.Context(), Options{
			Flavour: FlavourBase, ShipBinary: shared.ship, Engine: shared.engine, Force: true, KeepOld: true,
			Tag: tag, Mirror: "http://127.0.0.1:9/debian", Progress: &out,
		})
		if err == nil || !strings.Contains(err.Error(), "archive is unreachable") || !strings.Contains(err.Error(), "--mirror") {
			t.Errorf("err = %v\noutput:\n%s", err, out.String())
		}
		if _, ok, _ := (&builder{engine: shared.engine}).inspect(t.Context(), tag); ok {
			t.Errorf("a failed build tagged %s", tag)
		}
	})
	t.Run("ship binary missing", func(t *testing.T) {
		_, err := Build(t.Context(), Options{Flavour: FlavourBase, ShipBinary: "/nonexistent/ship", Engine: shared.engine})
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "make build") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestEngineUnreachable(t *testing.T) {
	c, err := client.New(client.WithHost("unix://" + filepath.Join(t.TempDir(), "docker.sock")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = Build(t.Context(), Options{Flavour: FlavourBase, ShipBinary: writeShip(t, "x"), Engine: c, Recipe: testRecipe()})
	if err == nil || !strings.Contains(err.Error(), "is dockerd running") {
		t.Errorf("err = %v", err)
	}
}
