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
