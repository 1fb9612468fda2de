package httpapi

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// bearerFromSubprotocol returns r with an Authorization header made of the API key a
// WebSocket handshake offers as the subprotocol bayapi.BearerSubprotocolPrefix +
// base64url(key), for browsers, which cannot set headers on a WebSocket. A request that has
// an Authorization header, is no WebSocket handshake or offers no such subprotocol is returned
// as it is; a malformed encoding is ignored (authentication then fails as without a key).
func bearerFromSubprotocol(r *http.Request) *http.Request {
	if r.Header.Get(bayapi.HeaderAuthorization) != "" || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return r
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), bayapi.BearerSubprotocolPrefix)
			if !ok || enc == "" || len(enc) > 1024 {
				continue
			}
			key, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				continue
			}
			r2 := r.Clone(r.Context())
			r2.Header.Set(bayapi.HeaderAuthorization, bayapi.BearerPrefix+string(key))
			return r2
		}
	}
	return r
}
