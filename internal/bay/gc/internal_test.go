package gc

import (
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestProvablyOurs(t *testing.T) {
	type object struct {
		name   string
		labels map[string]string
	}
	for kind, tc := range map[string]struct {
		o    ownership
		base func() object
		muts map[string]func(*object)
	}{
		"container": {
			o: containerOwnership,
			base: func() object {
				return object{"bay-session-sess-1", map[string]string{
					bay.LabelSessionID: "sess-1", bay.LabelSandboxID: "sandbox-1", bay.LabelCargoID: "ws-1",
					bay.LabelInstanceID: "me", bay.LabelManaged: "true"}}
			},
			muts: map[string]func(*object){
				"name":     func(c *object) { c.name = "session-1" },
				"managed":  func(c *object) { c.labels[bay.LabelManaged] = "True" },
				"instance": func(c *object) { c.labels[bay.LabelInstanceID] = "other" },
				"session":  func(c *object) { delete(c.labels, bay.LabelSessionID) },
				"sandbox":  func(c *object) { c.labels[bay.LabelSandboxID] = "" },
				"cargo":    func(c *object) { delete(c.labels, bay.LabelCargoID) },
			},
		},
		"network": {
			o: networkOwnership,
			base: func() object {
				return object{"bay_net_sess-1", map[string]string{
					bay.LabelSessionID: "sess-1", bay.LabelSandboxID: "sandbox-1",
					bay.LabelInstanceID: "me", bay.LabelManaged: "true"}}
			},
			muts: map[string]func(*object){
				"name":     func(n *object) { n.name = "bay-sess-1" },
				"managed":  func(n *object) { delete(n.labels, bay.LabelManaged) },
				"instance": func(n *object) { n.labels[bay.LabelInstanceID] = "other" },
				"session":  func(n *object) { n.labels[bay.LabelSessionID] = "" },
				"sandbox":  func(n *object) { delete(n.labels, bay.LabelSandboxID) },
			},
		},
	} {
		if b := tc.base(); !tc.o.provablyOurs(b.name, b.labels, "me") {
			t.Fatalf("%s: fully labelled object not recognised", kind)
		}
		for name, mut := range tc.muts {
			b := tc.base()
			mut(&b)
			if tc.o.provablyOurs(b.name, b.labels, "me") {
				t.Errorf("%s %s: accepted", kind, name)
			}
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
