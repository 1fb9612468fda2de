// Package egresstest builds a small "internet" inside a test: web hosts on loopback addresses
// the test chooses and a DNS server that knows only their names (and whatever forged answers
// the test adds). Nothing in it ever asks outside DNS.
package egresstest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// HTTPSName is the name the HTTPS host's certificate is valid for (httptest's certificate).
const HTTPSName = "example.com"

// Internet is the test's internet.
type Internet struct {
	// DNS is the upstream DNS server (UDP and TCP on the same port).
	DNS netip.AddrPort
	// Host is the web hosts' address; HTTPPort and HTTPSPort their ports.
	Host                netip.Addr
	HTTPPort, HTTPSPort int
	// RootCAs trusts the HTTPS host.
	RootCAs *x509.CertPool

	mu      sync.Mutex
	records map[string][]netip.Addr
	// Queries counts the questions the DNS server got, per name.
	queries map[string]int
	total   atomic.Int64
}

// Start starts the hosts on host (a loopback address such as 127.0.0.2) and the DNS server on
// 127.0.0.1, all closed when the test ends. The hosts answer "hello from <Host header>" on /.
func Start(t testing.TB, host netip.Addr) *Internet {
	t.Helper()
	in := &Internet{Host: host, records: map[string][]netip.Addr{}, queries: map[string]int{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	listen := func() net.Listener {
		l, err := net.Listen("tcp", netip.AddrPortFrom(host, 0).String())
		if err != nil {
			t.Fatalf("listen on %s: %v", host, err)
		}
		return l
	}
	hs := httptest.NewUnstartedServer(h)
	hs.Listener = listen()
	hs.Start()
	t.Cleanup(hs.Close)
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = listen()
	ts.StartTLS()
	t.Cleanup(ts.Close)
	in.HTTPPort = hs.Listener.Addr().(*net.TCPAddr).Port
	in.HTTPSPort = ts.Listener.Addr().(*net.TCPAddr).Port
	in.RootCAs = x509.NewCertPool()
	in.RootCAs.AddCert(ts.Certificate())

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in.DNS = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	tl, err := net.Listen("tcp", in.DNS.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); tl.Close() })
	go in.serveUDP(pc)
	go in.serveTCP(tl)
	return in
}

// Set makes name resolve to addrs (none: NXDOMAIN).
func (in *Internet) Set(name string, addrs ...netip.Addr) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.records[strings.ToLower(strings.TrimSuffix(name, "."))] = addrs
}

// Queries returns how many questions the DNS server got for names ending in suffix.
func (in *Internet) Queries(suffix string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for name, c := range in.queries {
		if strings.HasSuffix(name, suffix) {
			n += c
		}
	}
	return n
}

// TLSConfig trusts the HTTPS host and names it HTTPSName.
func (in *Internet) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: in.RootCAs, ServerName: HTTPSName}
}

func (in *Internet) answer(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	in.total.Add(1)
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	in.mu.Lock()
	in.queries[name]++
	addrs, ok := in.records[name]
	in.mu.Unlock()
	rcode := dnsmessage.RCodeSuccess
	if !ok || len(addrs) == 0 {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: true, RCode: rcode})
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	for _, a := range addrs {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 30}
		switch {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && q.Type == dnsmessage.TypeAAAA:
			_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
	}
	out, _ := b.Finish()
	return out
}

func (in *Internet) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := in.answer(buf[:n]); out != nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

func (in *Internet) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			var lb [2]byte
			if _, err := io.ReadFull(c, lb[:]); err != nil {
				return
			}
			m := make([]byte, int(lb[0])<<8|int(lb[1]))
			if _, err := io.ReadFull(c, m); err != nil {
				return
			}
			out := in.answer(m)
			_, _ = c.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...))
		}()
	}
}
