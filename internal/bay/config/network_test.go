package config

import (
	"reflect"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestProfileNetwork(t *testing.T) {
	c := mustLoad(t, `
profiles:
  - id: bare
  - id: listed
    network: {mode: allowlist, allow: ["*.Example.com", "203.0.113.9/24:443"], deny: [secret.example.com]}
  - id: offline
    network: {mode: none}
`)
	for id, want := range map[string]bay.NetworkPolicy{
		"bare":    {Mode: bay.NetworkOpen},
		"listed":  {Mode: bay.NetworkAllowlist, Allow: []string{"*.example.com", "203.0.113.0/24:443"}, Deny: []string{"secret.example.com"}},
		"offline": {Mode: bay.NetworkNone},
	} {
		p, _ := c.Profile(id)
		if !reflect.DeepEqual(p.Network, want) {
			t.Errorf("%s: network %+v, want %+v", id, p.Network, want)
		}
	}
	_, err := load(t, `
profiles:
  - id: bad
    network: {mode: allowlist, allow: [ok.test, "bad name"]}
`)
	wantErr(t, err, "profiles[0].network", "allow[1]")
	_, err = load(t, `
profiles:
  - id: bad
    network: {mode: sometimes}
`)
	wantErr(t, err, "profiles[0].network", "sometimes")
}
