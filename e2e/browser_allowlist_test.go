package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestBrowserUnderAllowlist: a browser-python sandbox under the allowlist. Its containers reach
// each other by name directly on the instance's own network, although both have HTTP(S)_PROXY
// pointing at bay's egress gateway (which refuses names that are not listed, ship's among them):
// gull's Chromium honours the proxy variables, so the peers are in NO_PROXY. A name off the list
// is still refused by the gateway, with the refusal counted among the sandbox's events.
// (Not parallel: the closed policies' gateway belongs to one bay at a time on this engine.)
func TestBrowserUnderAllowlist(t *testing.T) {
	_, in, host := policyInternet(t)
	profiles := strings.Replace(strings.ReplaceAll(browserProfiles, `"ship:latest"`, fmt.Sprintf("%q", testImage)),
		"    pids_limit: 512\n", "    pids_limit: 512\n    network: {mode: allowlist, allow: [example.com]}\n", 1)
	b := startPolicyBay(t, profiles, in, host)
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	if got := b.get(id).Str("network.mode"); got != "allowlist" {
		t.Fatalf("the sandbox's network mode: %q", got)
	}
	if env := b.shellOK(id, "echo $NO_PROXY"); !strings.Contains(env, ",ship,") || !strings.Contains(env, ",browser,") {
		t.Fatalf("ship's NO_PROXY lacks the peers: %q", env)
	}
	b.writeFile(id, "site/index.html", formPage)
	serveSite(t, b, id)
	contains(t, b.browserOK(id, "open http://ship:8000/index.html"), "Form", "the browser opens ship's page by name")
	if title := strings.TrimSpace(b.browserOK(id, "get title")); title != "Form" {
		t.Fatalf("title = %q", title)
	}
	// Ship reaches gull's runtime port by name too (a connection refused or answered, not the
	// gateway's refusal).
	if out := b.shellOK(id, "curl -s -o /dev/null -w '%{http_code}' http://browser:8115/health"); out != "200" {
		t.Fatalf("ship -> gull by name: %q", out)
	}
	// Chromium shows the gateway's refusal as the page.
	b.browser(id, "open http://evil.test/")
	contains(t, b.browserOK(id, "get text body"), "refused by the sandbox's network policy", "a name off the list")
	ev := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/network/events", nil, nil), 200, "events")
	contains(t, ev.String(), "evil.test", "the refusal is among the sandbox's network events")
}
