package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
)

// A profile whose image the engine lacks: bay warns at start, and a create of that profile
// is refused at once with 400 and the command that builds the image, until it is built. An
// engine that cannot say lets the create through (the start reports what it finds).
func TestMissingImageRefusesCreate(t *testing.T) {
	dir := t.TempDir()
	cfg := sqliteConfig(t, dir)
	drv := fake.New(fake.WithImages("some-other:image"))
	logs := &syncBuffer{}
	m := &app.Main{Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir}, Driver: drv,
		Log: slog.New(slog.NewJSONHandler(logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-m.Ready():
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	create := func() (int, map[string]any) {
		return call(t, "POST", "http://"+m.ListenAddr()+"/v1/sandboxes", `{"profile":"python-default"}`)
	}

	warned := false
	for _, l := range jsonLines(logs) {
		if l["level"] == "WARN" && strings.HasPrefix(l["msg"].(string), "profile image missing") && l["profile"] == "python-default" && l["image"] == "ship:latest" {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no start-up warning for python-default's missing ship:latest:\n%s", logs.String())
	}

	st, v := create()
	e, _ := v["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	if st != 400 || e["code"] != "validation_error" || d["reason"] != "image_missing" || d["image"] != "ship:latest" ||
		!strings.Contains(d["hint"].(string), "bay image build --flavour full") || !strings.Contains(e["message"].(string), "bay image build") {
		t.Fatalf("create with the image missing = %d %v", st, v)
	}
	if n := len(drv.Volumes()); n != 0 {
		t.Errorf("a refused create left %d volumes", n)
	}

	// An unknown profile names the valid ones.
	st, v = call(t, "POST", "http://"+m.ListenAddr()+"/v1/sandboxes", `{"profile":"nope"}`)
	e, _ = v["error"].(map[string]any)
	if msg, _ := e["message"].(string); st != 400 || !strings.HasPrefix(msg, "Invalid profile: nope (valid: python-default") {
		t.Errorf("unknown profile = %d %v", st, v)
	}

	drv.SetDown(true)
	if st, v := create(); st != 201 {
		t.Errorf("create while the engine cannot say = %d %v, want 201 (lazy start)", st, v)
	}
	drv.SetDown(false)
	drv.AddImage("ship:latest")
	if st, v := create(); st != 201 {
		t.Errorf("create once the image is built = %d %v", st, v)
	}
}

// With images.build_missing, bay builds its missing profile images in the background after it
// starts serving, the stand-in first: creates are told to retry until a stand-in is built, a
// ship:latest profile then starts on ship:base, and a failed build leaves its profiles refused
// with the hint, as for any missing image.
func TestBuildMissingImagesInTheBackground(t *testing.T) {
	dir := t.TempDir()
	cfg := sqliteConfig(t, dir)
	cfg.Images.BuildMissing = true
	drv := fake.New(fake.WithImages("some-other:image"))
	logs := &syncBuffer{}
	var (
		mu      sync.Mutex
		order   []string
		release = map[string]chan error{"ship:base": make(chan error), "ship:latest": make(chan error), "gull:latest": make(chan error)}
	)
	m := &app.Main{Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir}, Driver: drv,
		Log: slog.New(slog.NewJSONHandler(logs, nil)),
		BuildImage: func(ctx context.Context, image string, progress io.Writer) error {
			mu.Lock()
			order = append(order, image)
			mu.Unlock()
			fmt.Fprintf(progress, "building %s\n", image)
			select {
			case err := <-release[image]:
				if err == nil {
					drv.AddImage(image)
				}
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-m.Ready():
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	create := func(profile string) (int, map[string]any) {
		return call(t, "POST", "http://"+m.ListenAddr()+"/v1/sandboxes", `{"profile":"`+profile+`"}`)
	}
	detail := func(v map[string]any) (code, reason string) {
		e, _ := v["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		code, _ = e["code"].(string)
		reason, _ = d["reason"].(string)
		return code, reason
	}

	// Nothing built yet: every profile is being built, so creates are asked to retry.
	for _, p := range []string{"python-default", "browser-python"} {
		if st, v := create(p); st != 503 {
			t.Fatalf("create %s before any build = %d %v", p, st, v)
		} else if c, r := detail(v); c != "unavailable" || r != "image_building" {
			t.Fatalf("create %s before any build = %s %s", p, c, r)
		}
	}
	release["ship:base"] <- nil
	waitFor(t, func() bool { st, _ := create("python-default"); return st == 201 })
	if st, v := create("browser-python"); st != 503 {
		t.Fatalf("browser-python with gull:latest still building = %d %v", st, v)
	}
	release["ship:latest"] <- nil
	release["gull:latest"] <- errors.New("mmdebstrap failed")
	waitFor(t, func() bool { return strings.Contains(logs.String(), "background image build failed") })
	if st, v := create("browser-python"); st != 400 {
		t.Fatalf("browser-python after its image failed to build = %d %v", st, v)
	} else if c, r := detail(v); c != "validation_error" || r != "image_missing" {
		t.Fatalf("browser-python after its image failed to build = %s %s", c, r)
	}
	if st, v := create("python-default"); st != 201 {
		t.Fatalf("python-default once ship:latest is built = %d %v", st, v)
	}
	mu.Lock()
	got := strings.Join(order, ",")
	mu.Unlock()
	if got != "ship:base,ship:latest,gull:latest" {
		t.Errorf("build order %s, want the stand-in first", got)
	}
	for _, want := range []string{`"msg":"new sessions start on a stand-in until the image is built","image":"ship:latest","stand_in":"ship:base"`,
		`"msg":"image build","image":"ship:base","progress":"building ship:base"`, `"msg":"image built","image":"ship:latest"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

// The library's directory must not be, or lie in, the seed folder (as with make run's seed
// folder skills/ and the default skills.dir ./skills): bay refuses to start instead of writing
// its index and versions among the folders it loads.
func TestSkillsDirInsideTheSeedFolderIsRefused(t *testing.T) {
	for name, dirs := range map[string][2]string{"same": {"seed", "seed"}, "inside": {"seed", "seed/lib"}, "around": {"all/seed", "all"}} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			cfg := sqliteConfig(t, root)
			cfg.Skills.SeedDir, cfg.Skills.Dir = filepath.Join(root, dirs[0]), filepath.Join(root, dirs[1])
			if err := os.MkdirAll(cfg.Skills.SeedDir, 0o755); err != nil {
				t.Fatal(err)
			}
			m := &app.Main{Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + root}, Driver: fake.New(),
				Log: slog.New(slog.DiscardHandler)}
			err := m.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "overlap") {
				t.Fatalf("run = %v, want the overlap refused", err)
			}
			if entries, _ := os.ReadDir(cfg.Skills.SeedDir); len(entries) != 0 {
				t.Errorf("the seed folder got %d entries", len(entries))
			}
		})
	}
}
