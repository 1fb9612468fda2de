package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestConsoleAdmin drives the console's admin page in headless Chromium against the real bay
// and engine: an admin creates an API key (the secret is shown once and works at once), sees
// it with its owner in the lists, revokes it (refused at once), and reads the warm pool of a
// profile that keeps one (ready, then a create counted as a hit); a key that is not an admin
// key sees the admin sections refused.
// Wide and narrow, with no console error, CSP violation or overflow, a name on every control,
// and screenshots.
func TestConsoleAdmin(t *testing.T) {
	docker(t)
	shots := consoleShots(t)
	b := startBay(t, bayOptions{
		profiles: strings.ReplaceAll(defaultProfiles+`  - id: warm
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
    idle_timeout: 600
    warm_pool_size: 1
`, `"ship:latest"`, fmt.Sprintf("%q", testImage)),
		extraConfig: `warm_pool:
  interval_seconds: 1
  cleanup_on_shutdown: true
`,
	})
	p := startChromium(t, t.TempDir())
	p.viewport(1280, 800)
	clean := func(where string, allow403 bool) {
		t.Helper()
		p.check(t, where, func(pr string) bool {
			return allow403 && strings.Contains(pr, "403") && strings.Contains(pr, "/v1/admin/") // the refusals this key must meet
		})
	}
	signIn := func(key string) {
		t.Helper()
		p.navigate(b.URL + "/console/#/admin")
		p.waitFor("the sign-in form", `document.getElementById('apikey')`, 10*time.Second)
		p.eval(`document.getElementById('apikey').value = `+jsString(key)+`; document.querySelector('form.signin').requestSubmit()`, nil)
		p.waitFor("the admin page", `document.querySelector('main dl.facts, main .forbidden')`, 20*time.Second)
	}
	status := func(key string) int { return keyStatus(t, b, key) }

	signIn(apiKey)
	p.waitFor("the key list", `document.querySelector('table caption') && Array.from(document.querySelectorAll('table caption')).some((c) => c.textContent === 'API keys')`, 20*time.Second)
	p.waitFor("the create-key form", `!document.querySelector('form[aria-label="Create an API key"]').hidden`, 5*time.Second)

	// Create a key for bob: the secret is shown once, in a field, and works at once.
	p.eval(`document.getElementById('key-owner').value = 'bob'; document.getElementById('key-name').value = 'e2e notebook';
		document.querySelector('form[aria-label="Create an API key"]').requestSubmit()`, nil)
	p.waitFor("the new secret", `document.getElementById('key-secret-value') && document.getElementById('key-secret-value').value.startsWith('sk-bay-')`, 10*time.Second)
	var secret string
	p.eval(`document.getElementById('key-secret-value').value`, &secret)
	if got := status(secret); got != 200 {
		t.Fatalf("the key created in the console: GET /v1/sandboxes answered %d", got)
	}
	keyRow := `Array.from(document.querySelectorAll('tr')).find((r) => r.textContent.includes('e2e notebook'))`
	p.waitFor("the key in the list", keyRow+` && `+keyRow+`.textContent.includes('bob')`, 10*time.Second)
	p.waitFor("bob in the owners", `Array.from(document.querySelectorAll('tr')).some((r) => r.firstChild && r.firstChild.textContent === 'bob')`, 10*time.Second)
	var leaked bool
	p.eval(`Array.from(document.querySelectorAll('table')).some((t) => t.textContent.includes(`+jsString(secret)+`))`, &leaked)
	if leaked {
		t.Fatal("the secret is shown in a table")
	}
	p.screenshot(shots, "admin-key-created")
	clean("key created", false)

	// The warm pool's profile with its target; it fills from the real engine.
	warmRow := `Array.from(document.querySelectorAll('tr')).find((r) => r.firstChild && r.firstChild.textContent === 'warm')`
	deadline := time.Now().Add(90 * time.Second)
	for {
		p.navigate(b.URL + "/console/#/sandboxes")
		p.navigate(b.URL + "/console/#/admin")
		p.waitFor("the warm pool table", warmRow, 20*time.Second)
		var cells []string
		p.eval(`Array.from(`+warmRow+`.children).map((c) => c.textContent)`, &cells)
		if len(cells) != 7 || cells[1] != "1" {
			t.Fatalf("warm pool row: %v", cells)
		}
		if cells[2] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not show a ready sandbox: %v", cells)
		}
		time.Sleep(time.Second)
	}
	// A create of the profile is served from the pool: a hit on this bay.
	b.create(map[string]any{"profile": "warm"}, nil)
	p.navigate(b.URL + "/console/#/sandboxes")
	p.navigate(b.URL + "/console/#/admin")
	p.waitFor("the hit", warmRow+` && `+warmRow+`.children[5].textContent === '1' && `+warmRow+`.children[6].textContent === '0'`, 20*time.Second)

	// Every section, wide and narrow.
	for _, width := range []int{1280, 390} {
		p.viewport(width, 800)
		p.navigate(b.URL + "/console/#/admin")
		p.waitFor("the admin page", warmRow+` && `+keyRow, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		name := "admin"
		if width < 1280 {
			name += "-narrow"
		}
		p.screenshot(shots, name)
		clean(name, false)
	}
	p.viewport(1280, 800)

	// Revoke: asked twice, then refused at once.
	revoke := `document.querySelector('button[aria-label="Revoke key e2e notebook"]').click()`
	p.eval(revoke, nil)
	p.waitFor("the revoke to ask again", `document.querySelector('button[aria-label="Revoke key e2e notebook"]').textContent === 'Really revoke?'`, 5*time.Second)
	p.eval(revoke, nil)
	p.waitFor("the key revoked in the list", keyRow+` && `+keyRow+`.textContent.includes('revoked')`, 10*time.Second)
	if got := status(secret); got != 401 {
		t.Fatalf("the key revoked in the console: GET /v1/sandboxes answered %d", got)
	}
	p.screenshot(shots, "admin-key-revoked")
	clean("key revoked", false)

	// A key that is not an admin key: each admin section (GC, keys, owners, warm pool) says so, and no form is offered.
	carol := b.do("POST", "/v1/admin/keys", map[string]any{"owner": "carol", "name": "not an admin"}, nil)
	expect(t, carol, 201, "create carol's key")
	p.eval(`document.getElementById('signout').click()`, nil)
	signIn(carol.Str("key"))
	p.waitFor("the refusals", `document.querySelectorAll('main .forbidden').length === 4`, 20*time.Second)
	var shown bool
	p.eval(`document.querySelector('form[aria-label="Create an API key"]').offsetParent !== null`, &shown)
	if shown {
		t.Error("the create-key form is offered to a key that is not an admin key")
	}
	p.screenshot(shots, "admin-not-admin")
	clean("not an admin", true)
}

// check fails the test for what the page reported (console errors, exceptions, failed
// requests, CSP violations) unless allowed, for controls without an accessible name, and for
// a page wider than the window.
func (p *page) check(t *testing.T, where string, allowed func(problem string) bool) {
	t.Helper()
	var probs []string
	for _, pr := range p.takeProblems() {
		if allowed == nil || !allowed(pr) {
			probs = append(probs, pr)
		}
	}
	if len(probs) > 0 {
		t.Errorf("%s: the page reported problems:\n  %s", where, strings.Join(probs, "\n  "))
	}
	var gaps []string
	p.eval(a11yGaps, &gaps)
	if len(gaps) > 0 {
		t.Errorf("%s: controls without an accessible name: %v", where, gaps)
	}
	var overflow bool
	p.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Errorf("%s: the page is wider than the window", where)
	}
}
