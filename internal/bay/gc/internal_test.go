package gc

import (
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestProvablyOurs(t *testing.T) {
	base := func() bay.Instance {
		return bay.Instance{Name: "bay-session-sess-1", Labels: map[string]string{
			bay.LabelSessionID: "sess-1", bay.LabelSandboxID: "sandbox-1", bay.LabelCargoID: "ws-1",
			bay.LabelInstanceID: "me", bay.LabelManaged: "true"}}
	}
	if !provablyOurs(base(), "me") {
		t.Fatal("fully labelled instance not recognised")
	}
	for name, mut := range map[string]func(*bay.Instance){
		"name":     func(i *bay.Instance) { i.Name = "session-1" },
		"old net":  func(i *bay.Instance) { i.Name = "bay_net_sess-1" },
		"managed":  func(i *bay.Instance) { i.Labels[bay.LabelManaged] = "True" },
		"instance": func(i *bay.Instance) { i.Labels[bay.LabelInstanceID] = "other" },
		"session":  func(i *bay.Instance) { delete(i.Labels, bay.LabelSessionID) },
		"sandbox":  func(i *bay.Instance) { i.Labels[bay.LabelSandboxID] = "" },
		"cargo":    func(i *bay.Instance) { delete(i.Labels, bay.LabelCargoID) },
	} {
		i := base()
		mut(&i)
		if provablyOurs(i, "me") {
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
