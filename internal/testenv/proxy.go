package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxProxyBody bounds the request body RoundRobin buffers (it must be able to send a request
// again to the next backend when the first one refuses the connection).
const MaxProxyBody = 8 << 20

// HeaderBackend is set on every proxied response to the index of the backend that answered.
const HeaderBackend = "X-Testenv-Backend"

// RoundRobin is a reverse proxy on 127.0.0.1 that sends each request to the next of its
// backends in turn, as a load balancer in front of several bays does. A backend that refuses
// the connection (a bay that is down: the request never left) is skipped and the request goes
// to the next one; any other transport failure (the bay died while answering) is a 502 to the
// client, who decides whether the request is safe to send again.
type RoundRobin struct {
	URL      string
	backends []*url.URL
	next     atomic.Uint64
	served   []atomic.Int64
	skipped  atomic.Int64
	srv      *http.Server
	tr       *http.Transport
}

// StartRoundRobin listens on a free port of 127.0.0.1 and proxies to the backend base URLs.
func StartRoundRobin(backends ...string) (*RoundRobin, error) {
	if len(backends) == 0 {
		return nil, errors.New("round robin: no backend")
	}
	p := &RoundRobin{served: make([]atomic.Int64, len(backends)),
		tr: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("round robin: backend %q is not an http:// base URL", b)
		}
		p.backends = append(p.backends, u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("round robin: listen: %w", err)
	}
	p.URL = "http://" + ln.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Served returns how many requests each backend answered (in the order given).
func (p *RoundRobin) Served() []int64 {
	out := make([]int64, len(p.served))
	for i := range p.served {
		out[i] = p.served[i].Load()
	}
	return out
}

// Skipped is how many times a backend refused a connection and the next one was tried.
func (p *RoundRobin) Skipped() int64 { return p.skipped.Load() }

// Close stops the listener and closes every connection, in flight or idle.
func (p *RoundRobin) Close() error {
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// refused reports whether err says that the backend was not listening: nothing was sent.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (p *RoundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxProxyBody))
	if err != nil {
		http.Error(w, "round robin: read request body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	start := int(p.next.Add(1)-1) % len(p.backends)
	var last error
	for k := range p.backends {
		i := (start + k) % len(p.backends)
		b := p.backends[i]
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = b.Scheme, b.Host
		out.Host = b.Host
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		resp, err := p.tr.RoundTrip(out)
		if err != nil {
			last = err
			if refused(err) && r.Context().Err() == nil {
				p.skipped.Add(1)
				continue
			}
			break
		}
		p.served[i].Add(1)
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Set(HeaderBackend, strconv.Itoa(i))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	if errors.Is(last, context.Canceled) {
		return
	}
	http.Error(w, "round robin: "+last.Error(), http.StatusBadGateway)
}
