package egress

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The resolver answers a sandbox's queries: a name its policy refuses gets NXDOMAIN (and an
// event) without any query leaving the host, so that a tunnel through random subdomains of a
// refused zone carries nothing out; an allowed name is looked up upstream (so that a name
// that does not exist still fails as such) and answered with the gateway's own address, where
// the gateway reads the name again from the connection and connects to the upstream's
// addresses itself. AAAA and other types of an allowed name are answered empty: the gateway
// speaks IPv4 to the sandbox.

// Resolver bounds.
const (
	answerTTL       = 5 // seconds: a PATCH that refuses a name reaches clients that cache answers within it
	upstreamTimeout = 2 * time.Second
	maxDNSMessage   = 4096
	tcpQueryTimeout = 5 * time.Second
	maxCacheEntries = 4096
	minCacheTTL     = time.Second
	maxCacheTTL     = 60 * time.Second
	// maxQueriesInFlight bounds the queries answered at once; more are dropped (clients retry).
	maxQueriesInFlight = 256
)

// errNXDomain: the upstream says the name does not exist.
var errNXDomain = errors.New("no such name")

// upstream resolves names through the configured DNS servers, with a small cache.
type upstream struct {
	servers []string // host:port
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]cacheEntry
}

type cacheEntry struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

func newUpstream(servers []string, now func() time.Time) *upstream {
	return &upstream{servers: servers, now: now, cache: map[string]cacheEntry{}}
}

// lookup returns the IPv4 and IPv6 addresses of name (lowercase, with or without the final
// dot), errNXDomain when it does not exist.
func (u *upstream) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	name = strings.ToLower(strings.TrimSuffix(name, ".")) + "."
	u.mu.Lock()
	if e, ok := u.cache[name]; ok && u.now().Before(e.expires) {
		u.mu.Unlock()
		return e.addrs, e.err
	}
	u.mu.Unlock()
	var addrs []netip.Addr
	ttl := maxCacheTTL
	var errs []error
	nx := 0
	for _, t := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
		a, d, err := u.query(ctx, name, t)
		switch {
		case errors.Is(err, errNXDomain):
			nx++
		case err != nil:
			errs = append(errs, err)
		}
		addrs = append(addrs, a...)
		ttl = min(ttl, max(d, minCacheTTL))
	}
	var err error
	switch {
	case nx == 2:
		err = fmt.Errorf("%s: %w", strings.TrimSuffix(name, "."), errNXDomain)
	case len(addrs) == 0 && len(errs) > 0:
		return nil, errors.Join(errs...) // not cached: the upstream may be back soon
	}
	u.mu.Lock()
	if len(u.cache) >= maxCacheEntries {
		clear(u.cache)
	}
	u.cache[name] = cacheEntry{addrs: addrs, err: err, expires: u.now().Add(ttl)}
	u.mu.Unlock()
	return addrs, err
}

// query asks the servers in turn for one type of name and returns the addresses and the
// smallest TTL of the answer.
func (u *upstream) query(ctx context.Context, name string, t dnsmessage.Type) ([]netip.Addr, time.Duration, error) {
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, 0, fmt.Errorf("name %q: %w", name, err)
	}
	var id [2]byte
	_, _ = rand.Read(id[:])
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: binary.BigEndian.Uint16(id[:]), RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: qname, Type: t, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		return nil, 0, err
	}
	var errs []error
	for _, srv := range u.servers {
		resp, err := exchange(ctx, srv, q)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return parseAnswer(resp, binary.BigEndian.Uint16(id[:]), t)
	}
	if len(errs) == 0 {
		return nil, 0, errors.New("no upstream DNS server configured")
	}
	return nil, 0, fmt.Errorf("upstream DNS: %w", errors.Join(errs...))
}

// exchange sends q to srv over UDP and, when the answer is truncated, again over TCP.
func exchange(ctx context.Context, srv string, q []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", srv)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	buf := make([]byte, maxDNSMessage)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", srv, err)
		}
		if n < 12 || buf[0] != q[0] || buf[1] != q[1] {
			continue // not the answer to this query
		}
		if buf[2]&0x02 == 0 { // not truncated
			return buf[:n], nil
		}
		break
	}
	tc, err := d.DialContext(ctx, "tcp", srv)
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	_ = tc.SetDeadline(dl)
	if err := writeTCPMessage(tc, q); err != nil {
		return nil, err
	}
	return readTCPMessage(tc)
}

func writeTCPMessage(w io.Writer, m []byte) error {
	out := make([]byte, 2+len(m))
	binary.BigEndian.PutUint16(out, uint16(len(m)))
	copy(out[2:], m)
	_, err := w.Write(out)
	return err
}

func readTCPMessage(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	m := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, m); err != nil {
		return nil, err
	}
	return m, nil
}

// parseAnswer reads the addresses of type t from an answer to query id.
func parseAnswer(msg []byte, id uint16, t dnsmessage.Type) ([]netip.Addr, time.Duration, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, 0, fmt.Errorf("upstream answer: %w", err)
	}
	if h.ID != id || !h.Response {
		return nil, 0, errors.New("upstream answer to another query")
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeNameError:
		return nil, 0, errNXDomain
	default:
		return nil, 0, fmt.Errorf("upstream answered %v", h.RCode)
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil, 0, fmt.Errorf("upstream answer: %w", err)
	}
	var out []netip.Addr
	ttl := maxCacheTTL
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("upstream answer: %w", err)
		}
		ttl = min(ttl, time.Duration(rh.TTL)*time.Second)
		switch {
		case rh.Type == dnsmessage.TypeA && t == dnsmessage.TypeA:
			r, err := p.AResource()
			if err != nil {
				return nil, 0, err
			}
			out = append(out, netip.AddrFrom4(r.A))
		case rh.Type == dnsmessage.TypeAAAA && t == dnsmessage.TypeAAAA:
			r, err := p.AAAAResource()
			if err != nil {
				return nil, 0, err
			}
			out = append(out, netip.AddrFrom16(r.AAAA).Unmap())
		default:
			if err := p.SkipAnswer(); err != nil { // CNAMEs: the addresses follow
				return nil, 0, err
			}
		}
	}
	return out, ttl, nil
}

// answer builds the resolver's reply to a sandbox's query msg from src.
func (s *Service) answer(ctx context.Context, src netip.Addr, msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil // not a query: no reply
	}
	qs, err := p.AllQuestions()
	reply := func(rcode dnsmessage.RCode, q *dnsmessage.Question, a *netip.Addr) []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
			RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode})
		b.EnableCompression()
		_ = b.StartQuestions()
		if q != nil {
			_ = b.Question(*q)
		}
		if a != nil {
			_ = b.StartAnswers()
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: answerTTL},
				dnsmessage.AResource{A: a.As4()})
		}
		out, _ := b.Finish()
		return out
	}
	c := s.client(src)
	mode := ModeUnknown
	if c != nil {
		mode = string(c.policy.Mode)
	}
	if err != nil || len(qs) != 1 || h.OpCode != 0 {
		s.cfg.Observer.EgressQuery(mode, QueryMalformed)
		return reply(dnsmessage.RCodeFormatError, nil, nil)
	}
	q := qs[0]
	if c == nil {
		s.cfg.Observer.EgressQuery(mode, QueryUnknown)
		return reply(dnsmessage.RCodeRefused, &q, nil)
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	if c.policy.Mode == bay.NetworkNone {
		s.cfg.Observer.EgressQuery(mode, QueryRefused)
		s.deny(c.sandboxID, c.policy.Mode, "dns", name, 53, ruleModeNone)
		return reply(dnsmessage.RCodeNameError, &q, nil)
	}
	if ok, rule := c.policy.AllowsName(name, 0); !ok {
		s.cfg.Observer.EgressQuery(mode, QueryRefused)
		s.deny(c.sandboxID, c.policy.Mode, "dns", name, 53, rule)
		return reply(dnsmessage.RCodeNameError, &q, nil)
	}
	if _, err := s.up.lookup(ctx, name); err != nil {
		if errors.Is(err, errNXDomain) {
			s.cfg.Observer.EgressQuery(mode, QueryNXDomain)
			return reply(dnsmessage.RCodeNameError, &q, nil)
		}
		s.cfg.Observer.EgressQuery(mode, QueryUpstreamErr)
		s.log.Warn("upstream DNS failed", "sandbox_id", c.sandboxID, "name", name, "err", err)
		return reply(dnsmessage.RCodeServerFailure, &q, nil)
	}
	s.cfg.Observer.EgressQuery(mode, QueryAnswered)
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		gw := c.gateway
		return reply(dnsmessage.RCodeSuccess, &q, &gw)
	}
	return reply(dnsmessage.RCodeSuccess, &q, nil)
}

// serveDNS answers queries on pc until it is closed.
func (s *Service) serveDNS(ctx context.Context, pc net.PacketConn) {
	buf := make([]byte, maxDNSMessage)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			continue
		}
		src := from.(*net.UDPAddr).AddrPort().Addr().Unmap()
		msg := append([]byte(nil), buf[:n]...)
		select {
		case s.queries <- struct{}{}:
		default:
			continue // too many in flight: dropped, the client asks again
		}
		go func() {
			defer func() { <-s.queries }()
			qctx, cancel := context.WithTimeout(ctx, 2*upstreamTimeout)
			defer cancel()
			if out := s.answer(qctx, src, msg); out != nil {
				_, _ = pc.WriteTo(out, from)
			}
		}()
	}
}

// serveDNSTCP answers queries over TCP on l until it is closed (a few per connection).
func (s *Service) serveDNSTCP(ctx context.Context, l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			for range 16 {
				_ = c.SetDeadline(time.Now().Add(tcpQueryTimeout))
				msg, err := readTCPMessage(c)
				if err != nil {
					return
				}
				qctx, cancel := context.WithTimeout(ctx, 2*upstreamTimeout)
				out := s.answer(qctx, src, msg)
				cancel()
				if out == nil || writeTCPMessage(c, out) != nil {
					return
				}
			}
		}()
	}
}
