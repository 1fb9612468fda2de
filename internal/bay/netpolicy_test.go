package bay

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseNetworkEntry(t *testing.T) {
	good := map[string]string{
		"api.example.com":      "api.example.com",
		"API.Example.com.":     "api.example.com",
		"*.example.com":        "*.example.com",
		"api.example.com:443":  "api.example.com:443",
		"203.0.113.7":          "203.0.113.7",
		"203.0.113.9/24":       "203.0.113.0/24",
		"203.0.113.0/24:8443":  "203.0.113.0/24:8443",
		"2001:db8::1":          "2001:db8::1",
		"[2001:db8::1]:443":    "[2001:db8::1]:443",
		"[2001:db8::/32]":      "2001:db8::/32",
		"::ffff:203.0.113.7":   "203.0.113.7",
		"under_score.test":     "under_score.test",
		"*.a.b.example.com:80": "*.a.b.example.com:80",
	}
	for in, want := range good {
		e, err := ParseNetworkEntry(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if e.String() != want {
			t.Errorf("%q: got %q, want %q", in, e.String(), want)
		}
	}
	bad := []string{"", "*.com", "*", "a.*.com", "exa mple.com", "-a.com", "a..com", "api.example.com:0",
		"api.example.com:65536", "api.example.com:", "api.example.com:08", "[2001:db8::1", "[2001:db8::1]x",
		"fe80::1%eth0", strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 200) + "com", "héllo.com", "a/b"}
	for _, in := range bad {
		if e, err := ParseNetworkEntry(in); err == nil {
			t.Errorf("%q: accepted as %v", in, e)
		}
	}
}

func TestNetworkEntryMatch(t *testing.T) {
	w, _ := ParseNetworkEntry("*.example.com")
	for name, want := range map[string]bool{"a.example.com": true, "A.B.Example.COM.": true, "example.com": false, "badexample.com": false} {
		if got := w.MatchName(name, 443); got != want {
			t.Errorf("*.example.com ~ %s: %v, want %v", name, got, want)
		}
	}
	p, _ := ParseNetworkEntry("api.example.com:443")
	if !p.MatchName("api.example.com", 443) || p.MatchName("api.example.com", 80) || !p.MatchName("api.example.com", 0) {
		t.Error("port-bound entry matches the wrong ports")
	}
	c, _ := ParseNetworkEntry("203.0.113.0/24")
	if !c.MatchAddr(netip.MustParseAddr("203.0.113.200"), 1) || c.MatchAddr(netip.MustParseAddr("203.0.114.1"), 1) ||
		!c.MatchAddr(netip.MustParseAddr("::ffff:203.0.113.1"), 1) {
		t.Error("range matches the wrong addresses")
	}
}

func TestParseNetworkPolicy(t *testing.T) {
	for _, tc := range []struct {
		p     NetworkPolicy
		field string // "" = valid
	}{
		{NetworkPolicy{Mode: NetworkNone}, ""},
		{NetworkPolicy{Mode: NetworkOpen}, ""},
		{NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"*.example.com"}, Deny: []string{"secret.example.com"}}, ""},
		{NetworkPolicy{}, "network.mode"},
		{NetworkPolicy{Mode: "isolated"}, "network.mode"},
		{NetworkPolicy{Mode: NetworkOpen, Deny: []string{"example.com"}}, "network: mode open"},
		{NetworkPolicy{Mode: NetworkNone, Allow: []string{"example.com"}}, "network: mode none"},
		{NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"ok.com", "bad name"}}, "network.allow[1]"},
		{NetworkPolicy{Mode: NetworkAllowlist, Deny: []string{"*"}}, "network.deny[0]"},
		{NetworkPolicy{Mode: NetworkAllowlist, Allow: make([]string, MaxNetworkEntries+1)}, "network.allow: at most"},
	} {
		_, err := ParseNetworkPolicy("network", tc.p)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.p, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field) || ErrorCode(err) != CodeValidation):
			t.Errorf("%+v: got %v, want a validation error naming %s", tc.p, err, tc.field)
		}
	}
}

func TestTightenNetworkPolicy(t *testing.T) {
	ceil := NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"*.example.com", "api.other.test:443", "203.0.113.0/24"}, Deny: []string{"secret.example.com"}}
	for _, tc := range []struct {
		name    string
		ceiling NetworkPolicy
		req     NetworkPolicy
		want    string // effective policy as "mode allow deny", or the field named by the error
		err     bool
	}{
		{"open under open", NetworkPolicy{Mode: NetworkOpen}, NetworkPolicy{Mode: NetworkOpen}, "open [] []", false},
		{"isolated ceiling is open", NetworkPolicy{}, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"x.test"}}, "allowlist [x.test] []", false},
		{"none under allowlist", ceil, NetworkPolicy{Mode: NetworkNone}, "none [] []", false},
		{"open over allowlist", ceil, NetworkPolicy{Mode: NetworkOpen}, "network.mode", true},
		{"allowlist over none", NetworkPolicy{Mode: NetworkNone}, NetworkPolicy{Mode: NetworkAllowlist}, "network.mode", true},
		{"inherit allow, keep deny", ceil, NetworkPolicy{Mode: NetworkAllowlist},
			"allowlist [*.example.com api.other.test:443 203.0.113.0/24] [secret.example.com]", false},
		{"narrower entries", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"a.example.com:443", "*.b.example.com", "api.other.test:443", "203.0.113.8/29"}},
			"allowlist [a.example.com:443 *.b.example.com api.other.test:443 203.0.113.8/29] [secret.example.com]", false},
		{"empty allow stays empty", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{}}, "allowlist [] [secret.example.com]", false},
		{"apex outside wildcard", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"example.com"}}, "network.allow[0]", true},
		{"port widened", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"api.other.test"}}, "network.allow[0]", true},
		{"range widened", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"203.0.112.0/23"}}, "network.allow[0]", true},
		{"second entry outside", ceil, NetworkPolicy{Mode: NetworkAllowlist, Allow: []string{"a.example.com", "evil.test"}}, "network.allow[1]", true},
	} {
		got, err := TightenNetworkPolicy("network", tc.ceiling, tc.req)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) || ErrorCode(err) != CodeValidation {
				t.Errorf("%s: got %+v, %v; want a validation error naming %s", tc.name, got, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		s := string(got.Mode) + " [" + strings.Join(got.Allow, " ") + "] [" + strings.Join(got.Deny, " ") + "]"
		if s != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, s, tc.want)
		}
	}
}

func TestAllowsName(t *testing.T) {
	p, err := ParseNetworkPolicy("", NetworkPolicy{Mode: NetworkAllowlist,
		Allow: []string{"*.example.com", "api.test:443", "198.51.100.0/24"}, Deny: []string{"secret.example.com", "x.example.com:80"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		port int
		want bool
	}{
		{"a.example.com", 443, true}, {"a.example.com", 0, true}, {"secret.example.com", 443, false},
		{"secret.example.com", 0, false}, {"x.example.com", 80, false}, {"x.example.com", 0, true},
		{"x.example.com", 443, true}, {"api.test", 443, true}, {"api.test", 80, false}, {"api.test", 0, true},
		{"evil.test", 0, false}, {"example.com", 0, false},
	} {
		if got, rule := p.AllowsName(tc.name, tc.port); got != tc.want {
			t.Errorf("%s:%d: %v (%s), want %v", tc.name, tc.port, got, rule, tc.want)
		}
	}
	if ok, _ := p.AllowsAddr(netip.MustParseAddr("198.51.100.9"), 22); !ok {
		t.Error("allowed range refused")
	}
	if ok, _ := p.AllowsAddr(netip.MustParseAddr("198.51.101.9"), 22); ok {
		t.Error("address outside the allow list admitted")
	}
}
