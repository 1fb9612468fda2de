package browser_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/browser"
	"github.com/shipyard-dev/shipyard/internal/gull/cdp"
	"github.com/shipyard-dev/shipyard/internal/gull/gulltest"
)

// TestCommandOnClosingPage: Chromium drops the commands in flight on a page
// that closes; they end at once with cdp.ErrTargetClosed (not at their
// deadline, or never without one), and so does a release sent to the page
// after it closed itself.
func TestCommandOnClosingPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	m, err := browser.NewManager(ctx, browser.Config{Binary: gulltest.Chromium(t), ProfileDir: filepath.Join(dir, "profile"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	b, err := m.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.NewTab(ctx, ""); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err := b.Eval(ctx, "setTimeout(() => window.close(), 20); new Promise(() => {})")
		if !errors.Is(err, cdp.ErrTargetClosed) {
			t.Fatalf("%d: eval on a page that closes = %v, want ErrTargetClosed", i, err)
		}
		if el := time.Since(t0); el > 20*time.Second {
			t.Errorf("%d: the eval ended %v after the page closed", i, el)
		}
		// The release the runner sends after every command, on a context
		// without deadline: it must end too.
		done := make(chan struct{})
		go func() { b.Release(context.WithoutCancel(ctx)); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d: release on the closed page still waits", i)
		}
		tabs, err := b.Tabs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tabs) != 1 {
			t.Fatalf("%d: tabs after the page closed: %+v", i, tabs)
		}
	}
}
