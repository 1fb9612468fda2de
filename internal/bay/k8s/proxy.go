package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// When bay runs outside the cluster and cannot route to Pod addresses (ConnectProxy), it
// reaches runtimes through the API server's Pod proxy
// (/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/...), which needs the driver's
// credentials. The runtime clients know nothing of those: the driver serves a loopback
// listener that forwards "/<pod>/<port>/<path>" there with its own transport, and hands out
// endpoints on that listener ("http://127.0.0.1:<p>/<pod>/<port>"). Upgrades (the terminal's
// WebSocket) pass through over HTTP/1.1.

// ConnectMode is how bay reaches a runtime's port.
type ConnectMode string

const (
	// ConnectPodIP: the Pod's address (bay runs in the cluster, or on a node, and routes to
	// Pod addresses).
	ConnectPodIP ConnectMode = "pod_ip"
	// ConnectProxy: the API server's Pod proxy, through a loopback forwarder of the driver.
	ConnectProxy ConnectMode = "proxy"
)

type apiProxy struct {
	once sync.Once
	err  error
	base string // "http://127.0.0.1:port"
	srv  *http.Server
}

// proxyBase starts the forwarder on first use and returns its base URL.
func (d *Driver) proxyBase() (string, error) {
	p := &d.proxy
	p.once.Do(func() {
		tr, err := d.rest.Transport(true) // upgrades cannot pass over HTTP/2
		if err != nil {
			p.err = fmt.Errorf("api server proxy transport: %w", err)
			return
		}
		api, err := url.Parse(d.rest.Host)
		if err != nil || api.Host == "" {
			p.err = fmt.Errorf("api server address %q: %v", d.rest.Host, err)
			return
		}
		ns := d.cfg.Namespace
		rp := &httputil.ReverseProxy{
			Transport: tr,
			Rewrite: func(r *httputil.ProxyRequest) {
				// "/<pod>/<port>/<rest>" -> "/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<rest>"
				parts := strings.SplitN(strings.TrimPrefix(r.In.URL.Path, "/"), "/", 3)
				rest := ""
				if len(parts) == 3 {
					rest = parts[2]
				}
				r.Out.URL.Scheme, r.Out.URL.Host = api.Scheme, api.Host
				r.Out.URL.Path = strings.TrimSuffix(api.Path, "/") + "/api/v1/namespaces/" + ns + "/pods/" + parts[0] + ":" + parts[1] + "/proxy/" + rest
				r.Out.URL.RawPath = ""
				r.Out.Host = api.Host
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				http.Error(w, "kubernetes api server proxy: "+err.Error(), http.StatusBadGateway)
			},
		}
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
			if len(parts) < 2 || validName("pod", parts[0]) != nil || !isPort(parts[1]) {
				http.Error(w, "not a runtime path", http.StatusNotFound)
				return
			}
			rp.ServeHTTP(w, r)
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.err = fmt.Errorf("api server proxy listener: %w", err)
			return
		}
		p.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		p.base = "http://" + ln.Addr().String()
		go func() {
			if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("api server proxy stopped", "err", err)
			}
		}()
		d.log.Info("runtimes reached through the API server's pod proxy", "listener", p.base)
	})
	return p.base, p.err
}

func isPort(s string) bool {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 65535 {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return s != "" && n > 0 && n <= 65535
}

// Close stops the proxy forwarder, if it runs.
func (d *Driver) Close() error {
	if d.proxy.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.proxy.srv.Shutdown(ctx)
}
