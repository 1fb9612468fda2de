package e2e

import (
	"strings"
	"testing"
)

// On the real engine: a profile whose image was never built is refused at create with 400
// and the way to build it, and bay said so at start; the other profiles are unaffected.
func TestMissingImageIsRefusedAtCreate(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{profiles: `profiles:
  - id: python-default
    image: "ship:base"
    capabilities: [filesystem, shell, python]
  - id: unbuilt
    image: "shipyard-e2e-never-built:1"
    capabilities: [filesystem, shell, python]
`})
	r := b.do("POST", "/v1/sandboxes", map[string]any{"profile": "unbuilt"}, nil)
	if r.Status != 400 || r.Str("error.code") != "validation_error" || r.Str("error.details.reason") != "image_missing" ||
		r.Str("error.details.image") != "shipyard-e2e-never-built:1" || !strings.Contains(r.Str("error.details.hint"), "Dockerfile FROM ship:latest") {
		t.Fatalf("create of a profile without its image: %s", r)
	}
	b.create(map[string]any{"profile": "python-default"}, nil) // fails the test unless 201
	if logs := b.logs.String(); !strings.Contains(logs, "profile image missing") || !strings.Contains(logs, `"profile":"unbuilt"`) {
		t.Errorf("no start-up warning for the unbuilt profile")
	}
}
