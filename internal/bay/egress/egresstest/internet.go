// Package egresstest builds a small "internet" inside a test: web hosts on loopback addresses
// the test chooses and a DNS server that knows only their names (and whatever forged answers
// the test adds). Nothing in it ever asks outside DNS.
package egresstest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
	certPEM string
	closers []func()

	mu      sync.Mutex
	records map[string][]netip.Addr
	// Queries counts the questions the DNS server got, per name.
	queries map[string]int
	total   atomic.Int64
}

// Start starts the internet (New, then Serve on host) for a test, closed when it ends.
func Start(t testing.TB, host netip.Addr, httpPort, httpsPort int) *Internet {
	t.Helper()
	in, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	if err := in.Serve(host, httpPort, httpsPort); err != nil {
		t.Fatal(err)
	}
	return in
}

// New starts the DNS server on 127.0.0.1 (UDP and TCP on one free port); it knows no name yet.
func New() (*Internet, error) { return NewAt(netip.MustParseAddr("127.0.0.1")) }

// NewAt starts the DNS server on addr (an address of this machine that whoever asks reaches:
// the node's, for a gateway in a Pod).
func NewAt(addr netip.Addr) (*Internet, error) {
	in := &Internet{records: map[string][]netip.Addr{}, queries: map[string]int{}}
	var pc net.PacketConn
	var tl net.Listener
	for attempt := 0; ; attempt++ { // a UDP port whose number TCP has in use is tried again
		var err error
		if pc, err = net.ListenPacket("udp", netip.AddrPortFrom(addr, 0).String()); err != nil {
			return nil, err
		}
		in.DNS = pc.LocalAddr().(*net.UDPAddr).AddrPort()
		if tl, err = net.Listen("tcp", in.DNS.String()); err == nil {
			break
		}
		pc.Close()
		if attempt == 10 {
			return nil, err
		}
	}
	in.closers = append(in.closers, func() { pc.Close() }, func() { tl.Close() })
	go in.serveUDP(pc)
	go in.serveTCP(tl)
	return in, nil
}

// Serve starts the web hosts on host (a loopback address such as 127.0.0.2, or another address
// of this machine), plain HTTP on httpPort and HTTPS on httpsPort (0: any free port). They
// answer "hello from <Host header>" on /.
func (in *Internet) Serve(host netip.Addr, httpPort, httpsPort int) error {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	hl, err := net.Listen("tcp", netip.AddrPortFrom(host, uint16(httpPort)).String())
	if err != nil {
		return err
	}
	tl, err := net.Listen("tcp", netip.AddrPortFrom(host, uint16(httpsPort)).String())
	if err != nil {
		hl.Close()
		return err
	}
	hs := httptest.NewUnstartedServer(h)
	hs.Listener = hl
	hs.Start()
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = tl
	ts.StartTLS()
	in.closers = append(in.closers, hs.Close, ts.Close)
	in.Host = host
	in.HTTPPort = hl.Addr().(*net.TCPAddr).Port
	in.HTTPSPort = tl.Addr().(*net.TCPAddr).Port
	in.RootCAs = x509.NewCertPool()
	in.RootCAs.AddCert(ts.Certificate())
	in.certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}))
	return nil
}

// Close stops the DNS server and the hosts.
func (in *Internet) Close() {
	for _, c := range in.closers {
		c()
	}
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

// CertPEM is the HTTPS host's certificate in PEM, for clients in a sandbox to trust.
func (in *Internet) CertPEM() string { return in.certPEM }

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
