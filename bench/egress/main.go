// Command egress measures what bay's egress gateway costs an allowed HTTPS request: the same
// request from a sandbox in network mode allowlist (through the resolver and the gateway,
// transparently and through the proxy port) and from a sandbox in mode open (straight to the
// host), in the same run, against the whole in-process bay and the real engine.
//
// The "internet" is the benchmark's own: an HTTPS host on port 443 of the sandbox network's
// gateway address (which the configuration lets sandboxes reach with security.allowed_hosts)
// and a DNS server on loopback that names it example.com. Each request is a new TCP and TLS
// connection and one GET, timed inside the sandbox by Python (no process start in the time).
//
// Target: allowed HTTPS through the gateway <= 1.2x the same request in mode open (p50).
//
// Usage: go run ./bench/egress -out DIR [-n 200]
//
// It writes DIR/egress.json and DIR/egress.md and prints the table. Every sandbox it creates
// is deleted.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/bench/benchlib/inproc"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/egress/egresstest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		os.Exit(1)
	}
}

// client is the Python the sandboxes run: n new HTTPS connections to addr with the server
// name example.com (through the proxy when proxy is set), each timed, in milliseconds.
const clientPy = `
import json, socket, ssl, sys, time
addr, proxy, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile="ca.pem")

def read_all(s):
    b = b""
    while True:
        d = s.recv(65536)
        if not d:
            return b
        b += d

def once():
    if proxy:
        host, port = proxy.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert b" 200 " in head.split(b"\r\n")[0], head
    else:
        s = socket.create_connection((addr, 443), timeout=10)
    t = ctx.wrap_socket(s, server_hostname="example.com")
    t.sendall(b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
    body = read_all(t)
    t.close()
    assert body.startswith(b"HTTP/1.1 200") and body.endswith(b"hello from example.com"), body

out = []
for i in range(n + 5):
    t0 = time.perf_counter()
    once()
    if i >= 5:
        out.append((time.perf_counter() - t0) * 1000)
print(json.dumps(out))
`

func run() error {
	out := flag.String("out", "", "output directory (required)")
	n := flag.Int("n", 200, "requests measured per path")
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rep := &benchlib.Report{Title: "Egress gateway: allowed HTTPS through bay's gateway against mode open", Date: time.Now().UTC(),
		Machine: benchlib.ReadMachine(), GitRev: benchlib.GitRevision("."), LoadStart: benchlib.LoadAvg()}

	in, err := egresstest.New()
	if err != nil {
		return err
	}
	defer in.Close()
	gw, err := sandboxGateway(ctx)
	if err != nil {
		return err
	}
	if err := in.Serve(gw, 0, 443); err != nil {
		return err
	}
	in.Set(egresstest.HTTPSName, gw)

	instance := fmt.Sprintf("bench-egress-%d", os.Getpid())
	config := func(dir string) string {
		return fmt.Sprintf(`database:
  url: "sqlite:///%s/bay.db"
security:
  allow_anonymous: true
  allowed_hosts: ["%s/32"]
  egress_dns_upstream: ["%s"]
gc:
  enabled: false
  instance_id: %q
warm_pool:
  enabled: false
profiles:
  - id: open
    image: "ship:latest"
  - id: listed
    image: "ship:latest"
    network: {mode: allowlist, allow: [example.com]}
`, dir, gw, in.DNS, instance)
	}
	b, err := inproc.New(inproc.Options{TempPrefix: "egress-", Config: config,
		LogPath: filepath.Join(*out, "egress-bay.log"), LogLevel: slog.LevelWarn})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Start(ctx); err != nil {
		return err
	}
	defer b.Stop()
	api := &apiClient{base: b.URL(), hc: &http.Client{Timeout: 5 * time.Minute}}
	defer api.deleteAll()

	open, err := api.sandbox(ctx, "open", in.CertPEM())
	if err != nil {
		return err
	}
	listed, err := api.sandbox(ctx, "listed", in.CertPEM())
	if err != nil {
		return err
	}
	proxy := ""
	if env, err := api.shell(ctx, listed, "echo $HTTPS_PROXY"); err == nil {
		proxy = strings.TrimPrefix(strings.TrimSpace(env), "http://")
	}
	// Interleaved rounds, so that a change of the machine's load hits every path alike.
	var direct, transparent, proxied []float64
	const rounds = 4
	for r := range rounds {
		for _, p := range []struct {
			id, addr, proxy string
			into            *[]float64
		}{{open, gw.String(), "", &direct}, {listed, "example.com", "", &transparent}, {listed, "example.com", proxy, &proxied}} {
			ms, err := api.requests(ctx, p.id, p.addr, p.proxy, *n/rounds)
			if err != nil {
				return fmt.Errorf("round %d, %s via %q: %w", r, p.addr, p.proxy, err)
			}
			*p.into = append(*p.into, ms...)
		}
	}
	lat := func(name string, ms []float64) benchlib.Series {
		s := benchlib.SummarizeValues(ms, "ms")
		return benchlib.Series{Name: name, Stats: &s, Unit: "ms"}
	}
	for _, f := range []struct {
		id, title string
		ms        []float64
	}{
		{"gateway-transparent", "allowed HTTPS, mode allowlist, transparent (DNS answer -> gateway :443, SNI)", transparent},
		{"gateway-proxy", "allowed HTTPS, mode allowlist, HTTPS_PROXY (CONNECT)", proxied},
	} {
		fig := &benchlib.Figure{ID: f.id, Title: f.title, Measured: lat(f.title, f.ms)}
		fig.AddBaseline(lat("the same request in mode open, straight to the host", direct))
		fig.RatioAtMost(1.2)
		fig.Note("new TCP+TLS connection and one GET per request, timed in the sandbox by Python; %d requests per path in %d interleaved rounds", len(f.ms), rounds)
		rep.Figures = append(rep.Figures, fig)
	}
	rep.Duration = time.Since(began).Round(time.Second).String()
	rep.LoadEnd = benchlib.LoadAvg()
	path, err := rep.Write(*out, "egress")
	if err != nil {
		return err
	}
	fmt.Print(rep.Markdown())
	fmt.Println("written:", path)
	return nil
}

// sandboxGateway is the gateway address of the sandbox network (created by bay when missing;
// here it must exist: bay's other benchmarks and tests make it).
func sandboxGateway(ctx context.Context) (netip.Addr, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return netip.Addr{}, err
	}
	defer cli.Close()
	res, err := cli.NetworkInspect(ctx, docker.SandboxNetwork, client.NetworkInspectOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("network %s (start any sandbox once to create it): %w", docker.SandboxNetwork, err)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("network %s has no IPv4 gateway", docker.SandboxNetwork)
}

type apiClient struct {
	base string
	hc   *http.Client
	ids  []string
}

func (a *apiClient) call(ctx context.Context, method, path string, body, into any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if into != nil {
		return json.Unmarshal(raw, into)
	}
	return nil
}

// sandbox creates a sandbox of profile, starts it and writes the CA file into it.
func (a *apiClient) sandbox(ctx context.Context, profile, ca string) (string, error) {
	var sb struct{ ID string }
	if err := a.call(ctx, "POST", "/v1/sandboxes", map[string]any{"profile": profile}, &sb); err != nil {
		return "", err
	}
	a.ids = append(a.ids, sb.ID)
	if err := a.call(ctx, "PUT", "/v1/sandboxes/"+sb.ID+"/filesystem/files", map[string]any{"path": "ca.pem", "content": ca}, nil); err != nil {
		return "", err
	}
	if err := a.call(ctx, "PUT", "/v1/sandboxes/"+sb.ID+"/filesystem/files", map[string]any{"path": "client.py", "content": clientPy}, nil); err != nil {
		return "", err
	}
	return sb.ID, nil
}

func (a *apiClient) shell(ctx context.Context, id, cmd string) (string, error) {
	var r struct {
		Output   string
		ExitCode *int `json:"exit_code"`
	}
	if err := a.call(ctx, "POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": cmd, "timeout": 300}, &r); err != nil {
		return "", err
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		return "", fmt.Errorf("%q: exit %d: %s", cmd, *r.ExitCode, r.Output)
	}
	return r.Output, nil
}

// requests runs the client in the sandbox and returns its timings.
func (a *apiClient) requests(ctx context.Context, id, addr, proxy string, n int) ([]float64, error) {
	out, err := a.shell(ctx, id, fmt.Sprintf("python3 client.py %s '%s' %s", addr, proxy, strconv.Itoa(n)))
	if err != nil {
		return nil, err
	}
	var ms []float64
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ms); err != nil {
		return nil, fmt.Errorf("client output %q: %w", out, err)
	}
	return ms, nil
}

func (a *apiClient) deleteAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range a.ids {
		_ = a.call(ctx, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
}
