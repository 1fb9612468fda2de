package mcp

import (
	"net"
	"net/http"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// LoopbackClients returns the newClient function NewHTTPHandler needs when the handler is
// mounted inside bay: each tool call gets an SDK client for bay's own listen address (asked
// lazily through addr, because bay listens after mounting; an unspecified host such as
// 0.0.0.0 or :: becomes loopback) that carries the caller's API key (the Bearer token of the
// MCP request's Authorization header) and X-Owner header, so that the REST API authenticates
// and scopes the call exactly as a direct request. It returns nil (the call fails) while addr
// is still empty.
//
//	m.MountMCP = func(m *app.Main) http.Handler {
//		return mcp.NewHTTPHandler(mcp.LoopbackClients(m.ListenAddr))
//	}
func LoopbackClients(addr func() string, opts ...sdk.Option) func(r *http.Request) *sdk.Client {
	return func(r *http.Request) *sdk.Client {
		endpoint := loopbackURL(addr())
		if endpoint == "" {
			return nil
		}
		token := ""
		if a := r.Header.Get(bayapi.HeaderAuthorization); strings.HasPrefix(a, bayapi.BearerPrefix) {
			token = strings.TrimPrefix(a, bayapi.BearerPrefix)
		}
		o := opts
		if owner := r.Header.Get(bayapi.HeaderOwner); owner != "" {
			o = append(append([]sdk.Option(nil), opts...), sdk.WithOwner(owner))
		}
		c, err := sdk.New(endpoint, token, o...)
		if err != nil {
			return nil
		}
		return c
	}
}

func loopbackURL(addr string) string {
	if addr == "" {
		return ""
	}
	if strings.Contains(addr, "://") {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
