package docker

import (
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// TestPeersBypassProxy: under the allowlist a multi-container instance's containers reach each
// other by name without the egress gateway; a single container's environment is unchanged.
func TestPeersBypassProxy(t *testing.T) {
	env := map[string]string{"HTTP_PROXY": "http://172.30.0.1:3128", "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"}
	spec := bay.InstanceSpec{Name: "sbx-1", Containers: []bay.ContainerSpec{{Name: "ship"}, {Name: "browser"}}}
	got := peersBypassProxy(env, spec, true)
	want := "localhost,127.0.0.1,::1,ship," + containerName("sbx-1", true, "ship") + ",browser," + containerName("sbx-1", true, "browser")
	if got["NO_PROXY"] != want || got["no_proxy"] != want || got["HTTP_PROXY"] != env["HTTP_PROXY"] {
		t.Fatalf("env %v, want NO_PROXY %q", got, want)
	}
	if env["NO_PROXY"] != "localhost,127.0.0.1,::1" {
		t.Fatalf("the policy's own environment changed: %v", env)
	}
	if got := peersBypassProxy(env, bay.InstanceSpec{Name: "one", Containers: []bay.ContainerSpec{{Name: "ship"}}}, false); got["NO_PROXY"] != env["NO_PROXY"] {
		t.Fatalf("single container: %v", got)
	}
	if got := peersBypassProxy(nil, spec, true); got != nil {
		t.Fatalf("open policy: %v", got)
	}
}
