//go:build k8s

package k8se2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/sdk"
)

// httpsClientPy makes n new HTTPS connections with the server name example.com and one GET on
// each, and prints each one's time in milliseconds: "transparent" to example.com:443 (a DNS
// lookup through the gateway's resolver, then the gateway's TLS port), "proxy" through
// $HTTPS_PROXY (CONNECT; host is "-"), "direct" to an address and port (mode open: straight
// to the host).
const httpsClientPy = `
import json, os, socket, ssl, sys, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctx = ssl.create_default_context(cafile="ca.pem")
out = []
for _ in range(n):
    t0 = time.perf_counter()
    if mode == "proxy":
        ph, pp = os.environ["HTTPS_PROXY"].removeprefix("http://").rsplit(":", 1)
        s = socket.create_connection((ph, int(pp)))
        s.sendall(("CONNECT example.com:%d HTTP/1.1\r\nHost: example.com:%d\r\n\r\n" % (port, port)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head
    else:
        s = socket.create_connection((host, port))
    t = ctx.wrap_socket(s, server_hostname="example.com")
    t.sendall(b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
    body = b""
    while True:
        b = t.recv(65536)
        if not b:
            break
        body += b
    t.close()
    assert b"hello from example.com" in body, body
    out.append((time.perf_counter() - t0) * 1000)
print(json.dumps(out))
`

// BenchmarkEgressGatewayHTTPS measures what the Kubernetes egress gateway costs an allowed
// HTTPS request: the same request (a new TCP and TLS connection and one GET, timed inside the
// sandbox) from an allowlisted sandbox through the gateway (transparently and through the
// proxy) and from a sandbox in mode open straight to the host, interleaved in rounds in the
// same run. It reports each side's p50 and the ratios (target: <= 1.2x).
//
//	scripts/k8s/test.sh -run '^$' -bench EgressGatewayHTTPS -benchtime 1x ./e2e/k8se2e
func BenchmarkEgressGatewayHTTPS(b *testing.B) {
	w := startEgressWorld(b)
	ctx := b.Context()
	mk := func(profile string) *sdk.Sandbox {
		sb, err := w.c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: profile})
		if err != nil {
			b.Fatalf("create %s: %v", profile, err)
		}
		b.Cleanup(func() { _ = sb.Delete(context.WithoutCancel(ctx)) })
		for name, data := range map[string]string{"ca.pem": w.in.CertPEM(), "client.py": httpsClientPy} {
			if err := sb.WriteFile(ctx, name, data); err != nil {
				b.Fatal(err)
			}
		}
		return sb
	}
	listed, open := mk("listed"), mk("")
	run := func(sb *sdk.Sandbox, mode, host string, port, n int) []float64 {
		r, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: fmt.Sprintf("python3 client.py %s %s %d %d", mode, host, port, n),
			ExecOptions: sdk.ExecOptions{Timeout: 5 * time.Minute}})
		if err != nil || !r.Success {
			b.Fatalf("%s: %+v %v", mode, r, err)
		}
		var ms []float64
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.Output)), &ms); err != nil {
			b.Fatalf("%s: %q: %v", mode, r.Output, err)
		}
		return ms
	}
	tp := w.in.HTTPSPort
	// Warm: the first connections pay for the resolvers' caches and the interpreter.
	run(listed, "transparent", "example.com", 443, 3)
	run(listed, "proxy", "-", tp, 3)
	run(open, "direct", w.node.String(), tp, 3)
	var transparent, proxy, direct []float64
	const rounds, per = 5, 40
	b.ResetTimer()
	for b.Loop() {
		for range rounds {
			direct = append(direct, run(open, "direct", w.node.String(), tp, per)...)
			transparent = append(transparent, run(listed, "transparent", "example.com", 443, per)...)
			proxy = append(proxy, run(listed, "proxy", "-", tp, per)...)
		}
	}
	b.StopTimer()
	pct := func(v []float64, p float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	d, tr, px := pct(direct, 0.5), pct(transparent, 0.5), pct(proxy, 0.5)
	b.ReportMetric(d, "open-p50-ms")
	b.ReportMetric(tr, "transparent-p50-ms")
	b.ReportMetric(px, "proxy-p50-ms")
	b.ReportMetric(tr/d, "transparent/open")
	b.ReportMetric(px/d, "proxy/open")
	b.Logf("allowed HTTPS, %d requests a side: open (straight to the host) p50 %.2f ms (min %.2f, p99 %.2f); through the gateway transparently p50 %.2f ms (min %.2f, p99 %.2f) = %.2fx; through the proxy p50 %.2f ms (min %.2f, p99 %.2f) = %.2fx",
		len(direct), d, pct(direct, 0), pct(direct, 0.99), tr, pct(transparent, 0), pct(transparent, 0.99), tr/d, px, pct(proxy, 0), pct(proxy, 0.99), px/d)
}
