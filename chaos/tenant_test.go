package chaos

import (
	"strings"
	"testing"
)

// tenantPhase: owner B's key gets 404 not_found on every one of owner A's ids on every
// endpoint, B's lists never show A's objects, and A's objects are intact afterwards.
func tenantPhase(t *testing.T, rep *report, a, b *api, sa, sb string) {
	eid := a.shell(sa, "echo mine > secret.txt; echo done", 30).Str("execution_id")
	pr := a.do("POST", "/v1/sandboxes/"+sa+"/python/exec", map[string]any{"code": "print(2)"}, nil)
	cr := a.do("POST", "/v1/cargos", map[string]any{}, nil)
	cid := cr.Str("id")
	if eid == "" || cid == "" || pr.Status != 200 {
		t.Fatalf("owner A's objects: exec %q, python %s, cargo %s", eid, pr, cr)
	}
	sbox := "/v1/sandboxes/" + sa
	calls := []struct {
		method, path string
		body         any
	}{
		{"GET", sbox, nil},
		{"GET", sbox + "?detail=true", nil},
		{"POST", sbox + "/extend_ttl", map[string]any{"extend_by": 60}},
		{"POST", sbox + "/keepalive", map[string]any{}},
		{"POST", sbox + "/python/exec", map[string]any{"code": "print(open('secret.txt').read())"}},
		{"POST", sbox + "/shell/exec", map[string]any{"command": "cat secret.txt"}},
		{"POST", sbox + "/browser/exec", map[string]any{"cmd": "open about:blank"}},
		{"GET", sbox + "/filesystem/files?path=secret.txt", nil},
		{"PUT", sbox + "/filesystem/files", map[string]any{"path": "secret.txt", "content": "stolen"}},
		{"GET", sbox + "/filesystem/directories?path=.", nil},
		{"GET", sbox + "/filesystem/download?path=secret.txt", nil},
		{"DELETE", sbox + "/filesystem/files?path=secret.txt", nil},
		{"GET", sbox + "/terminal", nil},
		{"GET", sbox + "/history", nil},
		{"GET", sbox + "/history/last", nil},
		{"GET", sbox + "/history/" + eid, nil},
		{"PATCH", sbox + "/history/" + eid, map[string]any{"notes": "owned"}},
		{"GET", "/v1/sandboxes/" + sb + "/history/" + eid, nil}, // A's execution through B's own sandbox
		{"PATCH", "/v1/sandboxes/" + sb + "/history/" + eid, map[string]any{"notes": "owned"}},
		{"GET", "/v1/cargos/" + cid, nil},
		{"POST", "/v1/sandboxes", map[string]any{"cargo_id": cid}},
		{"POST", sbox + "/stop", map[string]any{}},
		{"DELETE", sbox, nil},
		{"DELETE", "/v1/cargos/" + cid, nil},
	}
	for _, spoof := range []map[string]string{nil, {"X-Owner": ownerA}} {
		for _, c := range calls {
			r := b.do(c.method, c.path, c.body, spoof)
			rep.mu.Lock()
			rep.Tenant.Checks++
			rep.mu.Unlock()
			if r.Status != 404 || (r.Str("error.code") != "not_found" && r.Str("error.code") != "file_not_found") {
				leak(rep, "owner B %s %s (headers %v): want 404 not_found, got %s", c.method, c.path, spoof, r)
			}
			if strings.Contains(string(r.Body), "mine") {
				leak(rep, "owner B %s %s: the answer shows owner A's data: %s", c.method, c.path, r)
			}
		}
	}
	upl := b.upload(sa, "stolen.txt", []byte("x"))
	rep.mu.Lock()
	rep.Tenant.Checks++
	rep.mu.Unlock()
	if upl.Status != 404 {
		leak(rep, "owner B upload into owner A's sandbox: %s", upl)
	}
	// B's lists, every page, never show A's ids.
	for _, list := range []string{"/v1/sandboxes", "/v1/cargos", "/v1/cargos?managed=true", "/v1/cargos?managed=false", "/v1/sandboxes?status=ready"} {
		cursor := ""
		for page := 0; page < 50; page++ {
			p := list
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			p += sep + "limit=200"
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			r := b.do("GET", p, nil, nil)
			rep.mu.Lock()
			rep.Tenant.Checks++
			rep.mu.Unlock()
			if r.Status != 200 {
				rep.fail("tenant: owner B GET %s: %s", p, r)
				break
			}
			if strings.Contains(string(r.Body), sa) || strings.Contains(string(r.Body), cid) {
				leak(rep, "owner B's list %s shows owner A's objects: %s", p, r)
			}
			cursor = r.Str("next_cursor")
			if cursor == "" {
				break
			}
		}
	}
	// A's objects are untouched.
	if out := a.shellOK(t, sa, "cat secret.txt; ls stolen.txt 2>/dev/null; true"); strings.TrimSpace(out) != "mine" {
		leak(rep, "owner A's workspace changed after owner B's calls: %q", out)
	}
	if r := a.do("GET", "/v1/cargos/"+cid, nil, nil); r.Status != 200 {
		leak(rep, "owner A's cargo after owner B's calls: %s", r)
	}
	if r := a.do("GET", "/v1/sandboxes/"+sa+"/history/"+eid, nil, nil); r.Status != 200 || r.Get("notes") != nil {
		leak(rep, "owner A's execution after owner B's calls: %s", r)
	}
}

func leak(rep *report, format string, args ...any) {
	rep.mu.Lock()
	rep.Tenant.Leaks++
	rep.mu.Unlock()
	rep.fail("tenant: "+format, args...)
}
