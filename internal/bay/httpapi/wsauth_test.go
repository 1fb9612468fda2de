package httpapi

import (
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

func TestBearerFromSubprotocol(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString([]byte("sk-key/with+odd=chars"))
	cases := []struct {
		name, upgrade, auth, proto, want string
	}{
		{"key offered", "websocket", "", bayapi.TerminalSubprotocol + ", " + bayapi.BearerSubprotocolPrefix + enc, "Bearer sk-key/with+odd=chars"},
		{"header wins", "websocket", "Bearer other", bayapi.BearerSubprotocolPrefix + enc, "Bearer other"},
		{"no websocket", "", "", bayapi.BearerSubprotocolPrefix + enc, ""},
		{"bad encoding", "websocket", "", bayapi.BearerSubprotocolPrefix + "!!!", ""},
		{"empty key", "websocket", "", bayapi.BearerSubprotocolPrefix, ""},
		{"no key offered", "websocket", "", bayapi.TerminalSubprotocol, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/v1/sandboxes/x/terminal", nil)
		if c.upgrade != "" {
			r.Header.Set("Upgrade", c.upgrade)
		}
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		r.Header.Set("Sec-WebSocket-Protocol", c.proto)
		got := bearerFromSubprotocol(r)
		if g := got.Header.Get("Authorization"); g != c.want {
			t.Errorf("%s: Authorization %q, want %q", c.name, g, c.want)
		}
		if c.want != "" && c.auth == "" && r.Header.Get("Authorization") != "" {
			t.Errorf("%s: the caller's request was modified", c.name)
		}
	}
}
