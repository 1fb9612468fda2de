package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Gateway bounds.
const (
	// sniffTimeout bounds the wait for a request head or a ClientHello.
	sniffTimeout = 10 * time.Second
	// maxHead bounds a request head or a ClientHello read before the upstream is chosen.
	maxHead = 64 << 10
	// MaxConnsPerInstance bounds the connections one instance has through the gateway at once
	// (sniffing, connecting or spliced); more are closed at once.
	MaxConnsPerInstance = 512
)

// accept serves l with handle until l is closed.
func (s *Service) accept(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn, *client)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Warn("egress accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go func() {
			src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			cl := s.client(src)
			if cl == nil {
				s.log.Debug("egress connection from an unknown address refused", "address", src)
				_ = c.Close()
				return
			}
			s.mu.Lock()
			n := s.active[cl.instance] + 1
			if n <= MaxConnsPerInstance {
				s.active[cl.instance] = n
			}
			s.mu.Unlock()
			if n > MaxConnsPerInstance {
				s.deny(cl.sandboxID, cl.policy.Mode, "tcp", "", 0, fmt.Sprintf("%s%d connections at once", ruleConnLimit, MaxConnsPerInstance))
				_ = c.Close()
				return
			}
			defer func() {
				s.mu.Lock()
				if s.active[cl.instance]--; s.active[cl.instance] <= 0 {
					delete(s.active, cl.instance)
				}
				s.mu.Unlock()
			}()
			handle(ctx, c, cl)
		}()
	}
}

// recorder keeps what is read through it, so that the bytes read to choose the upstream can
// be sent to it unchanged.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	if r.buf.Len() > maxHead {
		return n, errors.New("request head too large")
	}
	return n, err
}

// handleHTTP serves a transparent plain HTTP connection: the Host header names the upstream.
func (s *Service) handleHTTP(ctx context.Context, c net.Conn, cl *client) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	rec := &recorder{r: c}
	req, err := http.ReadRequest(bufio.NewReaderSize(rec, 4096))
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	host := hostOnly(req.Host)
	up, err := s.connect(ctx, cl, "http", host, s.cfg.UpstreamHTTPPort)
	if err != nil {
		refuseHTTP(c, err)
		return
	}
	if t := s.track(cl, "http", host, s.cfg.UpstreamHTTPPort, c, up); t != nil {
		s.splice(t, rec.buf.Bytes())
	}
}

// errSNI stops the handshake once the ClientHello is read.
var errSNI = errors.New("client hello read")

// handleTLS serves a transparent TLS connection: the ClientHello's server name names the
// upstream. The handshake is never answered by the gateway: its bytes go to the upstream.
func (s *Service) handleTLS(ctx context.Context, c net.Conn, cl *client) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	rec := &recorder{r: c}
	var name string
	err := tls.Server(readOnly{rec}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errSNI
	}}).HandshakeContext(ctx)
	if !errors.Is(err, errSNI) {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if name == "" {
		s.deny(cl.sandboxID, cl.policy.Mode, "tls", "", s.cfg.UpstreamTLSPort, ruleNoSNI)
		return
	}
	up, err := s.connect(ctx, cl, "tls", name, s.cfg.UpstreamTLSPort)
	if err != nil {
		return // a refusal has nothing to say in TLS: the client sees the connection closed
	}
	if t := s.track(cl, "tls", name, s.cfg.UpstreamTLSPort, c, up); t != nil {
		s.splice(t, rec.buf.Bytes())
	}
}

// readOnly is a net.Conn whose writes are dropped: the ClientHello is parsed without a reply.
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write(p []byte) (int, error)      { return len(p), nil }
func (readOnly) Close() error                     { return nil }
func (readOnly) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (readOnly) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }

// handleProxy serves the HTTP proxy port: CONNECT host:port, or an absolute-form request.
func (s *Service) handleProxy(ctx context.Context, c net.Conn, cl *client) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(io.LimitReader(c, maxHead), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		host, p, err := splitHostPort(req.Host, 0)
		if err != nil {
			refuseHTTP(c, refusal{status: http.StatusBadRequest, msg: err.Error()})
			return
		}
		up, err := s.connect(ctx, cl, "tcp", host, p)
		if err != nil {
			refuseHTTP(c, err)
			return
		}
		t := s.track(cl, "tcp", host, p, c, up)
		if t == nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			s.untrack(t)
			return
		}
		s.splice(t, buffered(br))
		return
	}
	if req.URL == nil || req.URL.Host == "" || req.URL.Scheme != "http" {
		refuseHTTP(c, refusal{status: http.StatusBadRequest, msg: "the proxy takes CONNECT or absolute http:// requests"})
		return
	}
	host, p, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		refuseHTTP(c, refusal{status: http.StatusBadRequest, msg: err.Error()})
		return
	}
	up, err := s.connect(ctx, cl, "http", host, p)
	if err != nil {
		refuseHTTP(c, err)
		return
	}
	// The request goes on in origin form and is the connection's last, so that a client
	// does not send its next request, maybe for another host, to this upstream.
	req.Close = true
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	var head bytes.Buffer
	if err := req.Write(&head); err != nil {
		_ = up.Close()
		return
	}
	if t := s.track(cl, "http", host, p, c, up); t != nil {
		s.splice(t, append(head.Bytes(), buffered(br)...))
	}
}

func buffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// refusal is a refused connection, with what the client is told.
type refusal struct {
	status int
	msg    string
}

func (r refusal) Error() string { return r.msg }

// refuseHTTP answers a refused HTTP request with a plain-text reason.
func refuseHTTP(c net.Conn, err error) {
	r, ok := err.(refusal)
	if !ok {
		r = refusal{status: http.StatusBadGateway, msg: "shipyard egress: " + err.Error()}
	}
	body := r.msg + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		r.status, http.StatusText(r.status), len(body), body)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func splitHostPort(hostport string, def int) (string, int, error) {
	h, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q: want host:port", hostport)
		}
		return strings.Trim(hostport, "[]"), def, nil
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("%q: port is not 1..65535", hostport)
	}
	return h, p, nil
}

// connect checks host:port against the client's policy, resolves a name through the upstream
// (never trusting the sandbox's idea of its address), drops the operator's blocked addresses
// and this host's own, and dials the first address left. Refusals are recorded and returned
// as a refusal.
func (s *Service) connect(ctx context.Context, cl *client, kind, host string, port int) (net.Conn, error) {
	if cl.policy.Mode != bay.NetworkAllowlist {
		return nil, refusal{status: http.StatusForbidden, msg: "shipyard egress: the sandbox's network mode is none"}
	}
	deny := func(rule string) error {
		s.deny(cl.sandboxID, cl.policy.Mode, kind, host, port, rule)
		return refusal{status: http.StatusForbidden,
			msg: fmt.Sprintf("shipyard egress: %s port %d is refused by the sandbox's network policy (%s)", host, port, rule)}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		if ok, rule := cl.policy.AllowsAddr(a, port); !ok {
			return nil, deny(rule)
		}
		addrs = []netip.Addr{a.Unmap()}
	} else {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if ok, rule := cl.policy.AllowsName(host, port); !ok {
			return nil, deny(rule)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*upstreamTimeout)
		addrs, err = s.up.lookup(rctx, host)
		cancel()
		if err != nil {
			if errors.Is(err, errNXDomain) {
				return nil, refusal{status: http.StatusBadGateway, msg: fmt.Sprintf("shipyard egress: %s does not exist", host)}
			}
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	var ok []netip.Addr
	var blocked netip.Addr
	for _, a := range addrs {
		if s.blocked(a) {
			blocked = a
			continue
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		if blocked.IsValid() {
			return nil, deny(ruleBlocked + blocked.String())
		}
		return nil, refusal{status: http.StatusBadGateway, msg: fmt.Sprintf("shipyard egress: %s has no address", host)}
	}
	d := net.Dialer{Timeout: s.cfg.DialTimeout}
	var errs []error
	for _, a := range ok {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connect to %s port %d: %w", host, port, errors.Join(errs...))
}

// blocked reports whether the gateway must not connect to a: a blocked range that no allowed
// range contains, or an address of this host (whose listeners the sandboxes must not reach
// through the gateway either).
func (s *Service) blocked(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.Allowed {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range s.cfg.Blocked {
		if p.Contains(a) {
			return true
		}
	}
	if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // fail closed
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ha, ok := netip.AddrFromSlice(n.IP); ok && ha.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// tracked is an open spliced connection.
type tracked struct {
	instance, sandboxID string
	kind, host          string
	port                int
	once                sync.Once
	down, up            net.Conn
}

func (t *tracked) close() {
	t.once.Do(func() {
		_ = t.down.Close()
		_ = t.up.Close()
	})
}

// allowedBy reports whether p still allows the connection.
func (t *tracked) allowedBy(p bay.ParsedNetworkPolicy) bool {
	if a, err := netip.ParseAddr(t.host); err == nil {
		ok, _ := p.AllowsAddr(a, t.port)
		return ok
	}
	ok, _ := p.AllowsName(t.host, t.port)
	return ok
}

// track records an open connection so that Update and Unregister can close it; nil (and
// both ends closed) when the service is closed or the client's policy changed since the
// connection was checked and no longer allows it.
func (s *Service) track(cl *client, kind, host string, port int, down, up net.Conn) *tracked {
	t := &tracked{instance: cl.instance, sandboxID: cl.sandboxID, kind: kind, host: host, port: port, down: down, up: up}
	s.mu.Lock()
	var cur *client
	for _, c := range s.clients {
		if c.instance == cl.instance {
			cur = c
			break
		}
	}
	if s.closed || cur == nil || !t.allowedBy(cur.policy) {
		s.mu.Unlock()
		t.close()
		return nil
	}
	s.conns[t] = struct{}{}
	s.mu.Unlock()
	return t
}

// untrack forgets t and closes it.
func (s *Service) untrack(t *tracked) {
	s.mu.Lock()
	delete(s.conns, t)
	s.mu.Unlock()
	t.close()
}

// splice sends first to t's upstream, then copies both ways until either side ends.
func (s *Service) splice(t *tracked, first []byte) {
	defer s.untrack(t)
	down, up := t.down, t.up
	if len(first) > 0 {
		if _, err := up.Write(first); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, down)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(down, up)
		closeWrite(down)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}
