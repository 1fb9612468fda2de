package auth

import (
	"net/http/httptest"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// BenchmarkPrincipal measures what the key administration added to every request (recording
// the key's last use) against the baseline in the same run: the constant-time comparison with
// every accepted hash, which Principal did before.
func BenchmarkPrincipal(b *testing.B) {
	s := &memStore{}
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKey = "root-key"
		c.Security.APIKeys = []config.APIKeyConfig{{Key: "alice-key", Owner: "alice"}, {Key: "bob-key", Owner: "bob"}}
	})
	a, _, err := Provision(b.Context(), s, c, nil, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/sandboxes", nil)
	r.Header.Set("Authorization", "Bearer bob-key")
	b.Run("baseline-match", func(b *testing.B) {
		a.mu.RLock()
		keys := a.keys
		a.mu.RUnlock()
		for b.Loop() {
			if _, ok := match(keys, "bob-key"); !ok {
				b.Fatal("no match")
			}
		}
	})
	b.Run("principal", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := a.Principal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("principal-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := a.Principal(r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
