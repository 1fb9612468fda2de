package kube

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The driver's tests (build tag k8s) hold this client to the real API server; these check
// what they cannot reach: notations, kubeconfig forms and the client's handling of answers.

func TestQuantity(t *testing.T) {
	for s, want := range map[string][2]int64{ // Value, MilliValue
		"1Gi": {1 << 30, 1000 << 30}, "300Mi": {300 << 20, 300_000 << 20}, "1500m": {2, 1500}, "0.5": {1, 500},
		"1e3": {1000, 1_000_000}, "2k": {2000, 2_000_000}, "1.5Gi": {3 << 29, 3000 << 29}, "100u": {1, 1}, "5": {5, 5000},
	} {
		q, err := ParseQuantity(s)
		if err != nil || q.Value() != want[0] || q.MilliValue() != want[1] {
			t.Errorf("%s: %d, %d, %v; want %d, %d", s, q.Value(), q.MilliValue(), err, want[0], want[1])
		}
	}
	for _, s := range []string{"lots", "", "1Gb", "1..5", "Gi", "1e", "1K"} {
		if _, err := ParseQuantity(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	if q, _ := ParseQuantity("-1Gi"); q.Sign() >= 0 {
		t.Error("-1Gi is not negative")
	}
	for got, want := range map[Quantity]string{
		NewQuantity(256 << 20): "256Mi", NewQuantity(1500): "1500", NewQuantity(0): "0", NewQuantity(3 << 30): "3Gi",
		NewMilliQuantity(1500): "1500m", NewMilliQuantity(2000): "2",
	} {
		if string(got) != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	var rl ResourceList
	if err := json.Unmarshal([]byte(`{"storage":"1Gi","cpu":2}`), &rl); err != nil || rl[ResourceStorage].Value() != 1<<30 || rl[ResourceCPU].Value() != 2 {
		t.Errorf("decoded %v, %v", rl, err)
	}
}

func TestNames(t *testing.T) {
	for v, ok := range map[string]bool{"bay": true, "Bay": false, "-a": false, strings.Repeat("a", 64): false, "a.b": false} {
		if got := len(IsDNS1123Label(v)) == 0; got != ok {
			t.Errorf("label %q: %v", v, got)
		}
	}
	for v, ok := range map[string]bool{"a.b-c": true, "a..b": false, "A": false} {
		if got := len(IsDNS1123Subdomain(v)) == 0; got != ok {
			t.Errorf("subdomain %q: %v", v, got)
		}
	}
	for v, ok := range map[string]bool{"bay.sandbox_id": true, "shipyard.dev/x": true, "/x": false, "a/b/c": false, "Bad Key": false, "x/": false} {
		if got := len(IsQualifiedName(v)) == 0; got != ok {
			t.Errorf("qualified name %q: %v", v, got)
		}
	}
	for v, ok := range map[string]bool{"": true, "2026-11-26": true, "Ann O'Neil": false, "a:b": false, strings.Repeat("a", 64): false} {
		if got := len(IsValidLabelValue(v)) == 0; got != ok {
			t.Errorf("label value %q: %v", v, got)
		}
	}
	if s := SelectorFromSet(map[string]string{"b": "2", "a": "1"}); s != "a=1,b=2" {
		t.Errorf("selector %q", s)
	}
}

// pemOf is the server's certificate, PEM.
func pemOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func TestKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("token", "tok-1\n")
	first := write("first", `apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c1, user: u1}
users:
- name: u1
  user: {tokenFile: token}
`)
	second := write("second", `apiVersion: v1
kind: Config
current-context: other
clusters:
- name: c1
  cluster:
    server: https://192.0.2.1:6443
    certificate-authority-data: `+base64.StdEncoding.EncodeToString([]byte("CA"))+`
    tls-server-name: api.example
- name: unused
  cluster: {server: https://192.0.2.9}
users:
- name: u1
  user: {token: not-this-one}
`)
	cfg, err := LoadKubeconfig(first, second)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.1:6443" || string(cfg.CAData) != "CA" || cfg.ServerName != "api.example" ||
		cfg.TokenFile != filepath.Join(dir, "token") || cfg.BearerToken != "" {
		t.Errorf("merged config = %+v: want the first file's context and user, the second's cluster, the token file by the first file's directory", cfg)
	}

	plugin := write("plugin", `current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://192.0.2.1"}}]
users: [{name: u, user: {exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}}]
`)
	if _, err := LoadKubeconfig(plugin); err == nil || !strings.Contains(err.Error(), "exec") {
		t.Errorf("a credential plugin: %v, want it refused by name", err)
	}
	if _, err := LoadKubeconfig(second); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("a missing context: %v", err)
	}
}

func TestClient(t *testing.T) {
	var calls, limited atomic.Int32
	var gotAuth, gotBody atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gotAuth.Store(r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/api/v1/namespaces/ns/pods/busy" && limited.Add(1) == 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/api/v1/namespaces/ns/pods/busy":
			fmt.Fprint(w, `{"metadata":{"name":"busy","creationTimestamp":"2026-11-26T07:00:00Z"},"status":{"podIP":"10.0.0.7","phase":"Running"}}`)
		case r.URL.Path == "/api/v1/namespaces/ns/pods/gone":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"gone\" not found","reason":"NotFound","code":404}`)
		case r.Method == http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			gotBody.Store(string(b))
			w.WriteHeader(http.StatusConflict) // a proxy's answer, without a Status
			fmt.Fprint(w, "conflict")
		case r.URL.Query().Get("watch") == "true":
			if r.URL.Query().Get("labelSelector") != "a=1" || r.URL.Query().Get("resourceVersion") != "7" {
				http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"type":"ADDED","object":{"metadata":{"name":"p","resourceVersion":"8"}}}
{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}}
`)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(&Config{Host: srv.URL, CAData: pemOf(srv), TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p, err := c.Pods("ns").Get(ctx, "busy")
	if err != nil || p.Status.PodIP != "10.0.0.7" || p.CreationTimestamp.Year() != 2026 || calls.Load() != 2 {
		t.Fatalf("Get after a 429: %+v, %v, %d calls; want it retried once", p, err, calls.Load())
	}
	if a := gotAuth.Load(); a != "Bearer tok-1" {
		t.Errorf("Authorization %q", a)
	}
	if _, err := c.Pods("ns").Get(ctx, "gone"); !IsNotFound(err) || err.Error() != `pods "gone" not found` {
		t.Errorf("Get of a missing pod: %v", err)
	}
	_, err = c.Secrets("ns").Create(ctx, &Secret{ObjectMeta: ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}})
	if !IsAlreadyExists(err) {
		t.Errorf("a create answered 409: %v, want AlreadyExists", err)
	}
	if b, _ := gotBody.Load().(string); !strings.Contains(b, `"apiVersion":"v1","kind":"Secret"`) || !strings.Contains(b, `"k":"dg=="`) {
		t.Errorf("created %s", b)
	}
	w, err := c.Pods("ns").Watch(ctx, ListOptions{LabelSelector: "a=1", ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event[Pod]
	for ev := range w.Events() {
		evs = append(evs, ev)
	}
	w.Stop()
	if len(evs) != 2 || evs[0].Type != Added || evs[0].Object.ResourceVersion != "8" || evs[1].Type != Error ||
		!HasReason(evs[1].Err, ReasonExpired) || w.Err() != io.EOF {
		t.Errorf("watch events %+v, end %v", evs, w.Err())
	}
	// The server's certificate is checked.
	other, err := New(&Config{Host: srv.URL, BearerToken: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Pods("ns").Get(ctx, "busy"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server of an unknown CA: %v", err)
	}
}
