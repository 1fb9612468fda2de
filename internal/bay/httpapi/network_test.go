package httpapi_test

import (
	"strings"
	"testing"
)

func TestNetworkEndpoints(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	path := "/v1/sandboxes/" + id + "/network"
	h.expect(h.do("PATCH", path, "alice", `{}`), 422, "validation_error")
	h.expect(h.do("PATCH", path, "alice", `{"mode": 5}`), 422, "validation_error")
	h.expect(h.do("PATCH", path, "alice", `{"mode": "none", "allow": "x"}`), 422, "validation_error")
	r := h.do("PATCH", path, "alice", `{"mode": "allowlist", "allow": ["bad name"]}`)
	h.expect(r, 400, "validation_error")
	if !strings.Contains(string(r.body), "network.allow[0]") {
		t.Errorf("the refusal does not name the entry: %s", r.body)
	}
	h.expect(h.do("PATCH", path, "bob", `{"mode": "none"}`), 404, "not_found")
	r = h.do("PATCH", path, "alice", `{"mode": "allowlist", "allow": ["api.example.com:443"]}`)
	h.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"network":{"mode":"allowlist","allow":["api.example.com:443"],"deny":[]}`) {
		t.Errorf("PATCH answer: %s", r.body)
	}
	h.expect(h.do("GET", path+"/events", "alice", nil), 200, "")
	h.expect(h.do("GET", path+"/events", "bob", nil), 404, "not_found")
	// A create request's network field is validated the same way.
	r = h.do("POST", "/v1/sandboxes", "alice", `{"network": {"mode": "sometimes"}}`)
	h.expect(r, 400, "validation_error")
	if !strings.Contains(string(r.body), "network.mode") {
		t.Errorf("create refusal: %s", r.body)
	}
}
