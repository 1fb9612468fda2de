package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

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
