package gc

import (
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestProvablyOurs(t *testing.T) {
	base := func() bay.ContainerInfo {
		return bay.ContainerInfo{Name: "/bay-session-sess-1", Labels: map[string]string{
			bay.LabelSessionID: "sess-1", bay.LabelSandboxID: "sandbox-1", bay.LabelCargoID: "ws-1",
			bay.LabelInstanceID: "me", bay.LabelManaged: "true"}}
	}
	if !provablyOurs(base(), "me") {
		t.Fatal("fully labelled container not recognised")
	}
	for name, mut := range map[string]func(*bay.ContainerInfo){
		"name":     func(c *bay.ContainerInfo) { c.Name = "/session-1" },
		"managed":  func(c *bay.ContainerInfo) { c.Labels[bay.LabelManaged] = "True" },
		"instance": func(c *bay.ContainerInfo) { c.Labels[bay.LabelInstanceID] = "other" },
		"session":  func(c *bay.ContainerInfo) { delete(c.Labels, bay.LabelSessionID) },
		"sandbox":  func(c *bay.ContainerInfo) { c.Labels[bay.LabelSandboxID] = "" },
		"cargo":    func(c *bay.ContainerInfo) { delete(c.Labels, bay.LabelCargoID) },
	} {
		c := base()
		mut(&c)
		if provablyOurs(c, "me") {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCreatedAt(t *testing.T) {
	engine := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	label := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := createdAt(map[string]string{bay.LabelCreatedAt: label.Format(time.RFC3339)}, engine); !got.Equal(label) {
		t.Errorf("label: %v", got)
	}
	if got := createdAt(map[string]string{bay.LabelCreatedAt: "garbage"}, engine); !got.Equal(engine) {
		t.Errorf("garbage label: %v", got)
	}
}
