package egresstest

import (
	"fmt"
	"strings"
	"testing"
)

// CheckNameRefusals runs, in a sandbox whose allowlist admits example.com and its subdomains
// but secret.example.com, and whose resolver's upstream is an Internet with evil.test and
// forged.example.com (answered 169.254.169.254) set, the refusals by name every driver must
// give: a refused name does not resolve, the proxy says why it refuses a name and a denied
// one, and an allowed name answered with a blocked address is refused with and without the
// proxy. curl runs curl with its arguments in the sandbox and returns its output followed by
// " rc=<exit status>".
func CheckNameRefusals(t *testing.T, curl func(args string) string) {
	t.Helper()
	if got := curl("--noproxy '*' http://evil.test/"); !strings.HasSuffix(got, "rc=6") {
		t.Errorf("refused name without the proxy: %q, want not resolved", got)
	}
	if got := curl("http://evil.test/"); !strings.Contains(got, "evil.test port 80 is refused by the sandbox's network policy") {
		t.Errorf("refused name through the proxy: %q", got)
	}
	if got := curl("http://secret.example.com/"); !strings.Contains(got, "deny secret.example.com") {
		t.Errorf("denied name: %q", got)
	}
	for _, args := range []string{"http://forged.example.com/", "--noproxy '*' http://forged.example.com/"} {
		if got := curl(args); !strings.Contains(got, "blocked address 169.254.169.254") {
			t.Errorf("forged answer (%s): %q", args, got)
		}
	}
}

// CheckNamesAllowed runs, in a sandbox whose allowlist admits api.example.com and example.com
// and holds the Internet's ca.pem in its working directory, the allowed requests every driver
// must carry: HTTP and HTTPS through the proxy (to the Internet's ports, httpPort and
// httpsPort) and transparently (to 80 and 443, which the gateway takes). curl is as for
// CheckNameRefusals.
func CheckNamesAllowed(t *testing.T, curl func(args string) string, httpPort, httpsPort int) {
	t.Helper()
	hostPort := func(host string, port, def int) string {
		if port == def {
			return host
		}
		return fmt.Sprintf("%s:%d", host, port)
	}
	api, web := hostPort("api.example.com", httpPort, 80), hostPort("example.com", httpsPort, 443)
	for _, c := range []struct{ args, want string }{
		{"http://" + api + "/", "hello from " + api + " rc=0"},
		{"--noproxy '*' http://api.example.com/", "hello from api.example.com rc=0"},
		{"--cacert ca.pem https://" + web + "/", "hello from " + web + " rc=0"},
		{"--noproxy '*' --cacert ca.pem https://example.com/", "hello from example.com rc=0"},
	} {
		if got := curl(c.args); got != c.want {
			t.Errorf("curl %s: %q, want %q", c.args, got, c.want)
		}
	}
}
