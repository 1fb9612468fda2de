package egressgw

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
	"github.com/shipyard-dev/shipyard/internal/bay/metrics"
)

func testGateway(t *testing.T) *Gateway {
	t.Helper()
	g, err := New(Config{Namespace: "sb", Service: "gw", ServiceNamespace: "gw", PodIP: netip.MustParseAddr("127.0.0.1"),
		Token: "0123456789abcdef0123"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.svc = egress.New(egress.Config{})
	t.Cleanup(func() { _ = g.svc.Close() })
	g.clusterIP = netip.MustParseAddr("10.96.0.53")
	return g
}

func pod(name, ip string, p bay.NetworkPolicy) *kube.Pod {
	ann, _ := Encode("sandbox-"+name, p)
	return &kube.Pod{ObjectMeta: kube.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationPolicy: ann}},
		Status: kube.PodStatus{PodIP: ip}}
}

// The gateway registers a Pod once it has an address and the annotation, follows a changed
// annotation, and forgets a Pod that ended, went, lost its annotation or carries one it cannot
// read (fail closed: an address it does not know is refused everything).
func TestApply(t *testing.T) {
	g := testGateway(t)
	list := bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}}
	p := pod("a", "", list)
	g.apply(p, false)
	if g.svc.Known("a") || g.status("a") != "" {
		t.Fatal("a Pod without an address is registered")
	}
	p.Status.PodIP = "10.244.0.7"
	g.apply(p, false)
	if !g.svc.Known("a") || g.status("a") != Version(p.Annotations[AnnotationPolicy]) {
		t.Fatalf("not registered: %q", g.status("a"))
	}
	narrower := pod("a", "10.244.0.7", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"api.example.com"}})
	g.apply(narrower, false)
	if g.status("a") != Version(narrower.Annotations[AnnotationPolicy]) {
		t.Error("the changed annotation was not applied")
	}
	for name, change := range map[string]func(*kube.Pod) (*kube.Pod, bool){
		"ended":         func(p *kube.Pod) (*kube.Pod, bool) { p.Status.Phase = kube.PodSucceeded; return p, false },
		"deleted":       func(p *kube.Pod) (*kube.Pod, bool) { return p, true },
		"no annotation": func(p *kube.Pod) (*kube.Pod, bool) { delete(p.Annotations, AnnotationPolicy); return p, false },
		"unreadable":    func(p *kube.Pod) (*kube.Pod, bool) { p.Annotations[AnnotationPolicy] = "{"; return p, false },
		"another mode": func(*kube.Pod) (*kube.Pod, bool) {
			return pod("a", "10.244.0.7", bay.NetworkPolicy{Mode: bay.NetworkOpen}), false
		},
		"a refused list": func(*kube.Pod) (*kube.Pod, bool) {
			return pod("a", "10.244.0.7", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"*"}}), false
		},
	} {
		g.apply(pod("a", "10.244.0.7", list), false)
		if !g.svc.Known("a") {
			t.Fatalf("%s: not registered to begin with", name)
		}
		q, deleted := change(pod("a", "10.244.0.7", list))
		g.apply(q, deleted)
		if g.svc.Known("a") || g.status("a") != "" {
			t.Errorf("%s: still registered", name)
		}
	}
}

// The admin port answers the readiness probe without a token and nothing else without the
// right one.
func TestAdmin(t *testing.T) {
	g := testGateway(t)
	g.apply(pod("a", "10.244.0.7", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}}), false)
	srv := httptest.NewServer(g.adminHandler())
	defer srv.Close()
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("readyz before the first list: %d", code)
	}
	g.ready.Store(true)
	if code, _ := get("/readyz", ""); code != http.StatusOK {
		t.Errorf("readyz: %d", code)
	}
	for _, tok := range []string{"", "wrong-token-0123456789"} {
		if code, _ := get("/v1/pods/a", tok); code != http.StatusUnauthorized {
			t.Errorf("pod status with token %q: %d", tok, code)
		}
		if code, _ := get("/v1/sandboxes/sandbox-a/events", tok); code != http.StatusUnauthorized {
			t.Errorf("events with token %q: %d", tok, code)
		}
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	cl := NewClient(g.cfg.Token)
	v, err := cl.PodVersion(context.Background(), addr, "a")
	if err != nil || v != g.status("a") || v == "" {
		t.Errorf("PodVersion: %q, %v; want %q", v, err, g.status("a"))
	}
	if v, err := cl.PodVersion(context.Background(), addr, "unknown"); err != nil || v != "" {
		t.Errorf("PodVersion of an unknown Pod: %q, %v", v, err)
	}
	evs, denied, err := cl.Events(context.Background(), addr, "sandbox-a")
	if err != nil || len(evs) != 0 || denied != 0 {
		t.Errorf("Events: %v %d %v", evs, denied, err)
	}
}

func TestAnnotation(t *testing.T) {
	p := bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}, Deny: []string{"secret.example.com"}}
	v, err := Encode("sandbox-1", p)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := Decode(v)
	if err != nil || pp.SandboxID != "sandbox-1" || pp.Policy.Mode != p.Mode || pp.Policy.Deny[0] != "secret.example.com" {
		t.Errorf("Decode(Encode) = %+v, %v", pp, err)
	}
	if _, err := Encode("", p); err == nil {
		t.Error("Encode without a sandbox id")
	}
	if _, err := Decode(`{"sandbox_id":"s","policy":{"mode":"allowlist","allow":["bad name!"]}}`); err == nil {
		t.Error("Decode of a refused list")
	}
	if Version(v) == Version(v+" ") || len(Version(v)) != 16 {
		t.Error("Version")
	}
}

// The admin port serves the refusal counters with the token only.
func TestAdminMetrics(t *testing.T) {
	m := metrics.New("test", nil)
	g, err := New(Config{Namespace: "sb", Service: "gw", ServiceNamespace: "gw", PodIP: netip.MustParseAddr("127.0.0.1"),
		Token: "0123456789abcdef0123", Metrics: m.Handler()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.EgressDenied("allowlist", "dns", "not_allowed") // as the egress service reports a refusal
	srv := httptest.NewServer(g.adminHandler())
	defer srv.Close()
	for _, tok := range []string{"", g.cfg.Token} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case tok == "" && resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("metrics without the token: %d", resp.StatusCode)
		case tok != "" && (resp.StatusCode != http.StatusOK ||
			!strings.Contains(string(b), `bay_egress_denied_total{kind="dns",mode="allowlist",reason="not_allowed"} 1`)):
			t.Errorf("metrics with the token: %d %s", resp.StatusCode, b)
		}
	}
}
