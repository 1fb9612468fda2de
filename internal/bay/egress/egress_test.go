package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/egress/egresstest"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// The tests run the gateway on 127.0.0.1 with the test process as the sandbox (registered at
// 127.0.0.1) and the test's internet on 127.0.0.2, which the operator's allowed ranges let
// through; 127.0.0.3 stands for a blocked address a forged answer points at.

var (
	lo      = netip.MustParseAddr("127.0.0.1")
	hostIP  = netip.MustParseAddr("127.0.0.2")
	trapIP  = netip.MustParseAddr("127.0.0.3")
	allowed = bay.NetworkPolicy{Mode: bay.NetworkAllowlist,
		Allow: []string{egresstest.HTTPSName, "*.example.com", "127.0.0.2/32"}, Deny: []string{"secret.example.com"}}
)

type fixture struct {
	in  *egresstest.Internet
	svc *Service
	ep  Endpoints
}

func setup(t *testing.T) *fixture {
	t.Helper()
	in := egresstest.Start(t, hostIP, 0, 0)
	for _, n := range []string{egresstest.HTTPSName, "api.example.com", "secret.example.com", "evil.test"} {
		in.Set(n, hostIP)
	}
	in.Set("forged.example.com", trapIP, netip.MustParseAddr("169.254.169.254"))
	// A listener at the trap proves a refusal is the gateway's, not a closed port's.
	trap, err := net.Listen("tcp", netip.AddrPortFrom(trapIP, uint16(in.HTTPPort)).String())
	if err == nil {
		t.Cleanup(func() { trap.Close() })
	}
	blocked, err := netguard.ParseHosts(netguard.DefaultBlocked)
	if err != nil {
		t.Fatal(err)
	}
	svc := New(Config{
		Upstream: []string{in.DNS.String()},
		Blocked:  blocked, Allowed: []netip.Prefix{netip.PrefixFrom(hostIP, 32)},
		DNSPort: -1, HTTPPort: -1, TLSPort: -1, ProxyPort: -1,
		UpstreamHTTPPort: in.HTTPPort, UpstreamTLSPort: in.HTTPSPort,
	})
	t.Cleanup(func() { svc.Close() })
	ep, err := svc.Listen(t.Context(), lo)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(lo, lo, "inst-1", "sandbox-1", allowed); err != nil {
		t.Fatal(err)
	}
	return &fixture{in: in, svc: svc, ep: ep}
}

// resolve asks the gateway's resolver for name's A record over UDP.
func (f *fixture) resolve(t *testing.T, name string) ([]netip.Addr, error) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, f.ep.DNS.String())
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return r.LookupNetIP(ctx, "ip4", name)
}

// client is an HTTP client whose connections go where the resolver sent them: the gateway's
// transparent ports.
func (f *fixture) client() *http.Client {
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		to := f.ep.HTTP
		if p == "443" {
			to = f.ep.TLS
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to.String())
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: f.in.RootCAs}, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestResolverAnswersOnlyAllowedNames(t *testing.T) {
	f := setup(t)
	got, err := f.resolve(t, "api.example.com")
	if err != nil || len(got) != 1 || got[0] != lo {
		t.Fatalf("allowed name: %v, %v; want the gateway %s", got, err, lo)
	}
	for _, n := range []string{"evil.test", "secret.example.com"} {
		_, err := f.resolve(t, n)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: %v, want not found", n, err)
		}
	}
	if n := f.in.Queries("evil.test"); n != 0 {
		t.Errorf("a refused name went upstream %d times", n)
	}
	// An allowed name the internet does not know fails as such.
	if _, err := f.resolve(t, "nowhere.example.com"); err == nil {
		t.Error("a name that does not exist resolved")
	}
}

func TestResolverRefusesUnknownSandbox(t *testing.T) {
	f := setup(t)
	f.svc.Unregister("inst-1")
	if _, err := f.resolve(t, "api.example.com"); err == nil {
		t.Fatal("an address that is no sandbox's got an answer")
	}
}

func TestDNSTunnelIsRefusedLocally(t *testing.T) {
	f := setup(t)
	for range 200 {
		var b [12]byte
		_, _ = rand.Read(b[:])
		if _, err := f.resolve(t, hex.EncodeToString(b[:])+".tunnel.evil.test"); err == nil {
			t.Fatal("a random subdomain of a refused zone resolved")
		}
	}
	if n := f.in.Queries("evil.test"); n != 0 {
		t.Errorf("%d tunnel queries reached the upstream", n)
	}
	ev, denied := f.svc.Events("sandbox-1")
	if denied < 200 || len(ev) != RingSize && len(ev) != int(denied) {
		t.Errorf("denied %d, ring %d", denied, len(ev))
	}
}

func TestAllowedNameOverHTTPAndHTTPS(t *testing.T) {
	f := setup(t)
	c := f.client()
	if code, body := get(t, c, "http://api.example.com/"); code != 200 || body != "hello from api.example.com" {
		t.Errorf("http: %d %q", code, body)
	}
	// TLS: the gateway never sees inside; the certificate checks out against the real host.
	if code, body := get(t, c, "https://"+egresstest.HTTPSName+"/"); code != 200 || body != "hello from "+egresstest.HTTPSName {
		t.Errorf("https: %d %q", code, body)
	}
}

func TestDeniedNameFailsFastWithAReason(t *testing.T) {
	f := setup(t)
	start := time.Now()
	code, body := get(t, f.client(), "http://evil.test/")
	if code != http.StatusForbidden || !strings.Contains(body, "evil.test") || !strings.Contains(body, "not in allow list") {
		t.Errorf("denied name: %d %q", code, body)
	}
	code, body = get(t, f.client(), "http://secret.example.com/")
	if code != http.StatusForbidden || !strings.Contains(body, "deny secret.example.com") {
		t.Errorf("denied by a deny entry: %d %q", code, body)
	}
	// TLS to a refused name: the connection is closed, no handshake completes.
	conn, err := tls.Dial("tcp", f.ep.TLS.String(), &tls.Config{ServerName: "evil.test", RootCAs: f.in.RootCAs})
	if err == nil {
		conn.Close()
		t.Error("TLS handshake with a refused name completed")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("refusals took %v", d)
	}
}

func TestForgedAnswerToBlockedAddressFails(t *testing.T) {
	f := setup(t)
	code, body := get(t, f.client(), "http://forged.example.com/")
	if code != http.StatusForbidden || !strings.Contains(body, "blocked address") {
		t.Errorf("forged answer: %d %q", code, body)
	}
}

// proxy sends a CONNECT through the proxy port and returns the status line and the connection.
func (f *fixture) connect(t *testing.T, target string) (string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", f.ep.Proxy.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return strings.TrimSpace(line), c
}

func TestProxy(t *testing.T) {
	f := setup(t)
	// CONNECT to an allowed name, then TLS through it.
	line, c := f.connect(t, fmt.Sprintf("%s:%d", egresstest.HTTPSName, f.in.HTTPSPort))
	if !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT allowed: %q", line)
	}
	tc := tls.Client(c, f.in.TLSConfig())
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through CONNECT: %v", err)
	}
	tc.Close()
	// An allowed range reached by address; an address outside the list refused.
	if line, _ := f.connect(t, fmt.Sprintf("127.0.0.2:%d", f.in.HTTPPort)); !strings.Contains(line, " 200 ") {
		t.Errorf("CONNECT allowed range: %q", line)
	}
	if line, _ := f.connect(t, fmt.Sprintf("127.0.0.3:%d", f.in.HTTPPort)); !strings.Contains(line, " 403 ") {
		t.Errorf("CONNECT to an address outside the list: %q", line)
	}
	if line, _ := f.connect(t, "evil.test:443"); !strings.Contains(line, " 403 ") {
		t.Errorf("CONNECT refused name: %q", line)
	}
	// An absolute-form request.
	pc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(mustURL("http://" + f.ep.Proxy.String()))}}
	if code, body := get(t, pc, fmt.Sprintf("http://api.example.com:%d/", f.in.HTTPPort)); code != 200 || !strings.Contains(body, "hello from api.example.com") {
		t.Errorf("absolute-form request: %d %q", code, body)
	}
	if code, _ := get(t, pc, "http://evil.test/"); code != http.StatusForbidden {
		t.Errorf("absolute-form refused name: %d", code)
	}
}

func TestUpdateClosesConnectionsItNoLongerAllows(t *testing.T) {
	f := setup(t)
	line, c := f.connect(t, fmt.Sprintf("api.example.com:%d", f.in.HTTPPort))
	if !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT: %q", line)
	}
	narrower := bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{egresstest.HTTPSName}}
	if err := f.svc.Update("inst-1", narrower); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection the policy no longer allows is still open: %v", err)
	}
	if _, err := f.resolve(t, "api.example.com"); err == nil {
		t.Error("the name the policy no longer allows still resolves")
	}
	if err := f.svc.Update("inst-1", bay.NetworkPolicy{Mode: bay.NetworkNone}); !errors.Is(err, bay.ErrRestartRequired) {
		t.Errorf("a change of mode: %v, want ErrRestartRequired", err)
	}
	if err := f.svc.Update("nope", narrower); !bay.IsNotFound(err) {
		t.Errorf("unknown instance: %v", err)
	}
}

func TestEventsRecordEachDenial(t *testing.T) {
	f := setup(t)
	_, _ = f.resolve(t, "evil.test")
	get(t, f.client(), "http://secret.example.com/")
	ev, denied := f.svc.Events("sandbox-1")
	if denied != 2 || len(ev) != 2 {
		t.Fatalf("events %+v, denied %d", ev, denied)
	}
	if ev[0].Kind != "dns" || ev[0].Host != "evil.test" || ev[1].Kind != "http" || ev[1].Host != "secret.example.com" || ev[1].Port != f.in.HTTPPort {
		t.Errorf("events %+v", ev)
	}
	if ev, n := f.svc.Events("sandbox-other"); len(ev) != 0 || n != 0 {
		t.Errorf("another sandbox sees %v", ev)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func TestConnectionsPerInstanceAreBounded(t *testing.T) {
	f := setup(t)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range MaxConnsPerInstance {
		c, err := net.Dial("tcp", f.ep.HTTP.String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	// The gateway counts a connection once it accepted it: wait for the last one.
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.svc.mu.Lock()
		n := f.svc.active["inst-1"]
		f.svc.mu.Unlock()
		if n == MaxConnsPerInstance || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	extra, err := net.Dial("tcp", f.ep.HTTP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection over the bound: %v, want closed", err)
	}
	if ev, _ := f.svc.Events("sandbox-1"); len(ev) == 0 || !strings.Contains(ev[len(ev)-1].Rule, "connections at once") {
		t.Errorf("events %+v", ev)
	}
}

// Restore brings back what a restarted bay found running, but never an instance unregistered
// meanwhile nor an address another instance holds.
func TestRestore(t *testing.T) {
	f := setup(t)
	f.svc.Unregister("inst-1")
	if _, err := f.resolve(t, "api.example.com"); err == nil {
		t.Fatal("an unregistered sandbox still resolves")
	}
	if ok, err := f.svc.Restore(lo, lo, "inst-1", "sandbox-1", allowed); ok || err != nil {
		t.Fatalf("restore of an instance destroyed meanwhile: %v, %v", ok, err)
	}
	if f.svc.Known("inst-1") {
		t.Fatal("inst-1 known after a refused restore")
	}
	if ok, err := f.svc.Restore(lo, lo, "inst-2", "sandbox-2", allowed); !ok || err != nil {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	if !f.svc.Known("inst-2") {
		t.Fatal("inst-2 unknown after its restore")
	}
	if got, err := f.resolve(t, "api.example.com"); err != nil || len(got) != 1 {
		t.Fatalf("after the restore: %v, %v", got, err)
	}
	if _, err := f.resolve(t, "evil.test"); err == nil {
		t.Fatal("a refused name resolves after the restore")
	}
	if ok, _ := f.svc.Restore(lo, lo, "inst-3", "sandbox-3", bay.NetworkPolicy{Mode: bay.NetworkNone}); ok {
		t.Fatal("restore took over the address of another instance")
	}
	if _, err := f.svc.Restore(lo, lo, "inst-2", "sandbox-2", bay.NetworkPolicy{Mode: bay.NetworkOpen}); err == nil {
		t.Fatal("restore in mode open accepted")
	}
	if err := f.svc.Update("inst-2", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}}); err != nil {
		t.Fatalf("update of a restored instance: %v", err)
	}
	if _, err := f.resolve(t, "api.example.com"); err == nil {
		t.Fatal("the update did not apply to the restored instance")
	}
}

type countingObserver struct {
	mu      sync.Mutex
	denied  map[string]int // mode/kind/reason
	queries map[string]int // mode/result
}

func (o *countingObserver) EgressDenied(mode, kind, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.denied[mode+"/"+kind+"/"+reason]++
}

func (o *countingObserver) EgressQuery(mode, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queries[mode+"/"+result]++
}

// The observer sees every refusal the events list records, classified by bounded reasons, and
// every DNS query by result.
func TestObserverAgreesWithEvents(t *testing.T) {
	f := setup(t)
	obs := &countingObserver{denied: map[string]int{}, queries: map[string]int{}}
	f.svc.cfg.Observer = obs
	for _, n := range []string{"api.example.com", "evil.test", "secret.example.com", "nothing.example.com"} {
		_, _ = f.resolve(t, n)
	}
	if code, _ := get(t, f.client(), "http://evil.test/"); code != http.StatusForbidden {
		t.Fatalf("transparent HTTP to a refused name: %d", code)
	}
	if code, _ := get(t, f.client(), "http://forged.example.com/"); code != http.StatusForbidden {
		t.Fatalf("transparent HTTP to a forged answer: %d", code)
	}
	_, denied := f.svc.Events("sandbox-1")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	sum := 0
	for _, n := range obs.denied {
		sum += n
	}
	if int64(sum) != denied || denied != 4 {
		t.Errorf("observer counted %d refusals (%v), events %d; want 4", sum, obs.denied, denied)
	}
	for k, want := range map[string]int{"allowlist/dns/not_allowed": 1, "allowlist/dns/deny_entry": 1,
		"allowlist/http/not_allowed": 1, "allowlist/http/blocked_address": 1} {
		if obs.denied[k] != want {
			t.Errorf("denied %s = %d, want %d (%v)", k, obs.denied[k], want, obs.denied)
		}
	}
	// The resolver library asks A and AAAA (and may retry): count by result, not exactly.
	if obs.queries["allowlist/answered"] < 1 || obs.queries["allowlist/refused"] < 2 || obs.queries["allowlist/nxdomain"] < 1 {
		t.Errorf("queries: %v", obs.queries)
	}
	if obs.queries["allowlist/refused"] != obs.denied["allowlist/dns/not_allowed"]+obs.denied["allowlist/dns/deny_entry"] {
		t.Errorf("refused queries %d and DNS refusals disagree (%v)", obs.queries["allowlist/refused"], obs.denied)
	}
}

func TestRangesToRoute(t *testing.T) {
	p, err := bay.ParseNetworkPolicy("network", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{
		"example.com", "203.0.113.7:22", "203.0.113.0/24:443", "198.51.100.9", "[2001:db8::/32]:443", "10.1.2.3/8"}})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(RangesToRoute(p))
	if want := "[10.0.0.0/8 203.0.113.0/24 198.51.100.9/32]"; got != want {
		t.Errorf("ranges %s, want %s (IPv4 only, masked, none inside another)", got, want)
	}
}
