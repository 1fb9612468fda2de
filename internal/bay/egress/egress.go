// Package egress is bay's enforcement of allowlist network policies: a DNS resolver and an
// egress gateway that bay runs on the gateway address of the network allowlisted sandboxes
// sit on. That network has no route out (an internal bridge), so what a sandbox reaches
// beyond it is what this package lets through:
//
//   - the resolver (port 53, UDP and TCP) answers only names the sandbox's policy allows,
//     with the gateway's own address (dns.go); a refused name gets NXDOMAIN at once and is
//     never asked upstream;
//   - the gateway takes plain HTTP on port 80 (it reads the Host header) and TLS on port 443
//     (it reads the ClientHello's server name; it never terminates TLS), checks the name
//     against the policy, resolves it itself through the configured upstream (so the
//     sandbox's /etc/hosts or a forged answer cannot point it elsewhere), refuses addresses
//     the operator blocks (security.blocked_hosts unless allowed_hosts, and this host's own)
//     and splices the connection to the first address left (gateway.go);
//   - an HTTP proxy port takes CONNECT host:port and absolute-form requests, for clients that
//     honour HTTP(S)_PROXY and for ports other than 80 and 443;
//   - a direct port takes the TCP connections to the IPv4 ranges of an allow list, which the
//     table redirects there (direct.go);
//   - an nftables table of its own (nft.go) lets the sandboxes of that network reach only
//     those ports of the gateway address and forwards nothing, so UDP other than DNS and any
//     direct connection are refused.
//
// A sandbox is known by its address on that network (Register); its refusals are counted and
// kept in a bounded ring per sandbox (events.go). A policy changed at run time (Update)
// applies to new queries and connections at once and closes the open connections it no
// longer allows.
package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Default ports of the gateway address.
const (
	DefaultDNSPort   = 53
	DefaultHTTPPort  = 80
	DefaultTLSPort   = 443
	DefaultProxyPort = 3128
)

// Config configures a Service.
type Config struct {
	// Upstream are the DNS servers (host:port) the resolver and the gateway ask.
	Upstream []string
	// Blocked and Allowed are the operator's ranges (security.blocked_hosts, allowed_hosts):
	// the gateway never connects to a blocked address that no allowed range contains.
	Blocked, Allowed []netip.Prefix
	// Ports the gateway listens on (0 = the defaults above; -1 = any free port, for tests).
	DNSPort, HTTPPort, TLSPort, ProxyPort int
	// DirectPort takes the connections redirected to the address ranges of allow lists
	// (direct.go; 0 = DefaultDirectPort, -1 = any free port).
	DirectPort int
	// UpstreamHTTPPort and UpstreamTLSPort are the ports transparent HTTP and TLS connections
	// are forwarded to (0 = 80 and 443; tests point them at their own servers).
	UpstreamHTTPPort, UpstreamTLSPort int
	// DialTimeout bounds a connection to an upstream (default 10 s).
	DialTimeout time.Duration
	// Observer counts refusals and DNS queries (nil: not counted).
	Observer Observer
	Log      *slog.Logger
	Now      func() time.Time
}

// Endpoints are the addresses a Listen bound.
type Endpoints struct {
	DNS, HTTP, TLS, Proxy, Direct netip.AddrPort
}

// Service is the resolver and gateway. It is safe for concurrent use.
type Service struct {
	cfg    Config
	log    *slog.Logger
	up     *upstream
	events *events

	mu        sync.Mutex
	clients   map[netip.Addr]*client
	listening map[netip.Addr]*listeners
	conns     map[*tracked]struct{}
	active    map[string]int // instance -> connections being handled
	// gone are the instances unregistered lately (instance -> when): Restore never brings
	// one back, whatever a container list taken before its destruction still showed.
	gone   map[string]time.Time
	closed bool
	// confined: the nftables table is in use (Attach), so the direct ranges are kept in it.
	confined bool
	directMu sync.Mutex // serializes syncDirect
	// queries bounds the DNS queries being answered at once (a flood waits for none).
	queries chan struct{}
}

// client is a registered sandbox address.
type client struct {
	instance  string
	sandboxID string
	gateway   netip.Addr
	policy    bay.ParsedNetworkPolicy
}

type listeners struct {
	ep     Endpoints
	cancel context.CancelFunc
	close  []func() error
}

// New returns a Service; nothing listens until Listen.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	cfg.UpstreamHTTPPort = cmp.Or(cfg.UpstreamHTTPPort, DefaultHTTPPort)
	cfg.UpstreamTLSPort = cmp.Or(cfg.UpstreamTLSPort, DefaultTLSPort)
	return &Service{
		cfg: cfg, log: cfg.Log, up: newUpstream(cfg.Upstream, cfg.Now), events: newEvents(cfg.Log, cfg.Now),
		clients: map[netip.Addr]*client{}, listening: map[netip.Addr]*listeners{}, conns: map[*tracked]struct{}{},
		active: map[string]int{}, gone: map[string]time.Time{}, queries: make(chan struct{}, maxQueriesInFlight),
	}
}

func port(p, def int) int {
	switch {
	case p == 0:
		return def
	case p < 0:
		return 0
	}
	return p
}

// Listen starts the resolver and the gateway on addr (the gateway address of the sandboxes'
// network) unless they run there already, and returns where they listen.
func (s *Service) Listen(ctx context.Context, addr netip.Addr) (Endpoints, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Endpoints{}, errors.New("egress: closed")
	}
	if l := s.listening[addr]; l != nil {
		return l.ep, nil
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &listeners{cancel: cancel}
	fail := func(err error) (Endpoints, error) {
		cancel()
		for _, c := range l.close {
			_ = c()
		}
		return Endpoints{}, fmt.Errorf("egress: listen on %s: %w", addr, err)
	}
	var lc net.ListenConfig
	at := func(p int) string { return net.JoinHostPort(addr.String(), strconv.Itoa(p)) }
	// UDP and TCP DNS on one port number, as clients expect; an ephemeral UDP port whose
	// number TCP has in use is tried again.
	var pc net.PacketConn
	var dl net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = lc.ListenPacket(lctx, "udp", at(port(s.cfg.DNSPort, DefaultDNSPort))); err != nil {
			return fail(err)
		}
		l.ep.DNS = pc.LocalAddr().(*net.UDPAddr).AddrPort()
		if dl, err = lc.Listen(lctx, "tcp", at(int(l.ep.DNS.Port()))); err == nil {
			break
		}
		_ = pc.Close()
		if s.cfg.DNSPort >= 0 || attempt == 10 {
			return fail(err)
		}
	}
	l.close = append(l.close, pc.Close, dl.Close)
	tcp := func(p, def int) (net.Listener, netip.AddrPort, error) {
		ln, err := lc.Listen(lctx, "tcp", at(port(p, def)))
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		l.close = append(l.close, ln.Close)
		return ln, ln.Addr().(*net.TCPAddr).AddrPort(), nil
	}
	hl, hep, err := tcp(s.cfg.HTTPPort, DefaultHTTPPort)
	if err != nil {
		return fail(err)
	}
	tl, tep, err := tcp(s.cfg.TLSPort, DefaultTLSPort)
	if err != nil {
		return fail(err)
	}
	pl, pep, err := tcp(s.cfg.ProxyPort, DefaultProxyPort)
	if err != nil {
		return fail(err)
	}
	dtl, dep, err := tcp(s.cfg.DirectPort, DefaultDirectPort)
	if err != nil {
		return fail(err)
	}
	l.ep.HTTP, l.ep.TLS, l.ep.Proxy, l.ep.Direct = hep, tep, pep, dep
	go s.serveDNS(lctx, pc)
	go s.serveDNSTCP(lctx, dl)
	go s.accept(lctx, hl, s.handleHTTP)
	go s.accept(lctx, tl, s.handleTLS)
	go s.accept(lctx, pl, s.handleProxy)
	go s.accept(lctx, dtl, s.handleDirect)
	s.listening[addr] = l
	s.log.Info("egress gateway listening", "address", addr, "dns", l.ep.DNS, "http", l.ep.HTTP, "tls", l.ep.TLS, "proxy", l.ep.Proxy, "direct", l.ep.Direct)
	return l.ep, nil
}

// Register makes the sandbox at addr (on a network whose gateway address is gateway) known
// under instance with policy p (an allowlist). A new registration of addr replaces the old.
func (s *Service) Register(addr, gateway netip.Addr, instance, sandboxID string, p bay.NetworkPolicy) error {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return fmt.Errorf("egress: register %s: %w", instance, err)
	}
	if parsed.Mode != bay.NetworkAllowlist && parsed.Mode != bay.NetworkNone {
		return fmt.Errorf("egress: register %s: mode %s is not enforced by the gateway", instance, parsed.Mode)
	}
	s.mu.Lock()
	s.clients[addr.Unmap()] = &client{instance: instance, sandboxID: sandboxID, gateway: gateway.Unmap(), policy: parsed}
	s.mu.Unlock()
	s.log.Debug("egress client registered", "instance", instance, "sandbox_id", sandboxID, "address", addr)
	if len(RangesToRoute(parsed)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), nftTimeout)
	defer cancel()
	if err := s.syncDirect(ctx); err != nil {
		return fmt.Errorf("egress: register %s: %w", instance, err)
	}
	return nil
}

// Restore registers the sandbox at addr like Register, for an instance found running when
// this Service did not know it (bay restarted, or another bay created it): it refuses an
// instance unregistered lately (being destroyed) and an address registered to another
// instance, so a stale list can neither bring back a destroyed instance nor take over an
// address. It reports whether it registered.
func (s *Service) Restore(addr, gateway netip.Addr, instance, sandboxID string, p bay.NetworkPolicy) (bool, error) {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return false, fmt.Errorf("egress: restore %s: %w", instance, err)
	}
	if parsed.Mode != bay.NetworkAllowlist && parsed.Mode != bay.NetworkNone {
		return false, fmt.Errorf("egress: restore %s: mode %s is not enforced by the gateway", instance, parsed.Mode)
	}
	s.mu.Lock()
	if _, ok := s.gone[instance]; ok {
		s.mu.Unlock()
		return false, nil
	}
	if c := s.clients[addr.Unmap()]; c != nil && c.instance != instance {
		s.mu.Unlock()
		return false, nil
	}
	s.clients[addr.Unmap()] = &client{instance: instance, sandboxID: sandboxID, gateway: gateway.Unmap(), policy: parsed}
	s.mu.Unlock()
	if len(RangesToRoute(parsed)) == 0 {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), nftTimeout)
	defer cancel()
	if err := s.syncDirect(ctx); err != nil {
		return true, fmt.Errorf("egress: restore %s: %w", instance, err)
	}
	return true, nil
}

// Known reports whether any address is registered under instance.
func (s *Service) Known(instance string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		if c.instance == instance {
			return true
		}
	}
	return false
}

// Update gives the instance's addresses policy p: queries and new connections follow it at
// once, open connections it no longer allows are closed. An unknown instance wraps
// bay.ErrNotFound; a mode other than allowlist bay.ErrRestartRequired.
func (s *Service) Update(instance string, p bay.NetworkPolicy) error {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return fmt.Errorf("egress: update %s: %w", instance, err)
	}
	if parsed.Mode != bay.NetworkAllowlist {
		return fmt.Errorf("egress: update %s to mode %s: %w", instance, parsed.Mode, bay.ErrRestartRequired)
	}
	s.mu.Lock()
	found := false
	for a, c := range s.clients {
		if c.instance == instance {
			nc := *c
			nc.policy = parsed
			s.clients[a] = &nc
			found = true
		}
	}
	var stale []*tracked
	for t := range s.conns {
		if t.instance == instance && !t.allowedBy(parsed) {
			stale = append(stale, t)
		}
	}
	s.mu.Unlock()
	if !found {
		return fmt.Errorf("egress: update %s: %w", instance, bay.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nftTimeout)
	defer cancel()
	if err := s.syncDirect(ctx); err != nil {
		return fmt.Errorf("egress: update %s: %w", instance, err)
	}
	for _, t := range stale {
		s.deny(t.sandboxID, bay.NetworkAllowlist, t.kind, t.host, t.port, ruleClosed)
		t.close()
	}
	return nil
}

// goneFor is how long an unregistered instance is kept from Restore; maxGone bounds them.
const (
	goneFor = 10 * time.Minute
	maxGone = 8192
)

// Unregister forgets the instance's addresses and closes its connections.
func (s *Service) Unregister(instance string) {
	s.mu.Lock()
	now := s.cfg.Now()
	if len(s.gone) >= maxGone {
		for n, at := range s.gone {
			if now.Sub(at) > goneFor || len(s.gone) >= maxGone {
				delete(s.gone, n)
			}
		}
	}
	s.gone[instance] = now
	for a, c := range s.clients {
		if c.instance == instance {
			delete(s.clients, a)
		}
	}
	var open []*tracked
	for t := range s.conns {
		if t.instance == instance {
			open = append(open, t)
		}
	}
	s.mu.Unlock()
	for _, t := range open {
		t.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), nftTimeout)
	defer cancel()
	if err := s.syncDirect(ctx); err != nil {
		// A range left for a gone address only redirects to the gateway, which refuses an
		// unknown or other sandbox's address by its own policy.
		s.log.Warn("egress: forgetting the direct ranges of an instance", "instance", instance, "err", err)
	}
}

// nftTimeout bounds an update of the table's elements.
const nftTimeout = 10 * time.Second

// Events returns the sandbox's newest refusals (oldest first) and their total count.
func (s *Service) Events(sandboxID string) ([]bay.NetworkEvent, int64) {
	return s.events.list(sandboxID)
}

// client returns the registration of src, or nil.
func (s *Service) client(src netip.Addr) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[src.Unmap()]
}

// Close stops every listener and closes every connection.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	ls := s.listening
	s.listening = map[netip.Addr]*listeners{}
	var open []*tracked
	for t := range s.conns {
		open = append(open, t)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.cancel()
		for _, c := range l.close {
			_ = c()
		}
	}
	for _, t := range open {
		t.close()
	}
	return nil
}

// Attach starts the resolver and gateway on gw, the gateway address of bridge, confines the
// bridge to them (Table) and returns the proxy URL for the sandboxes' HTTP(S)_PROXY.
func (s *Service) Attach(ctx context.Context, bridge string, gw netip.Addr) (string, error) {
	ep, err := s.Listen(ctx, gw)
	if err != nil {
		return "", err
	}
	if err := confine(ctx, bridge, gw, ep, false); err != nil {
		return "", err
	}
	s.mu.Lock()
	first := !s.confined
	s.confined = true
	s.mu.Unlock()
	if first {
		// The set as this process knows it (a restarted bay: empty until restored).
		if err := s.syncDirect(ctx); err != nil {
			return "", err
		}
	}
	return "http://" + ep.Proxy.String(), nil
}

// Seal confines bridge to itself: nothing of it is forwarded out, nothing of the host answers
// it (but replies to bay's own connections) except, when gw is valid, the resolver on gw,
// which refuses every name at once (sandboxes without network learn that promptly instead of
// after their resolver's timeouts).
func (s *Service) Seal(ctx context.Context, bridge string, gw netip.Addr) error {
	var ep Endpoints
	if gw.IsValid() {
		var err error
		if ep, err = s.Listen(ctx, gw); err != nil {
			return err
		}
	}
	return confine(ctx, bridge, gw, ep, true)
}
