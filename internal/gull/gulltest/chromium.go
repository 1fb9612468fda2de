// Package gulltest finds the Chromium the tests and benchmarks drive.
package gulltest

import (
	"os"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/gull/browser"
)

// Chromium returns the Chromium binary for tests: $GULL_TEST_CHROMIUM or
// Debian's chromium-headless-shell. A missing browser fails the test (never
// skips): scripts/install-deps.sh installs it.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("GULL_TEST_CHROMIUM"), browser.DefaultBinary, "/usr/lib/chromium/chromium"} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	t.Fatalf("no Chromium found (%s): run scripts/install-deps.sh (apt-get install chromium-headless-shell)", browser.DefaultBinary)
	return ""
}
