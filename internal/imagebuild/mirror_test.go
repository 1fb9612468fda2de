package imagebuild

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostDeb822 is the debian.sources of the build machines, plus a disabled
// stanza and a third-party repository.
const hostDeb822 = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://disabled.example/debian
Suites: trixie
Components: main
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main
`

func TestParseDeb822Sources(t *testing.T) {
	got := ParseDeb822Sources([]byte(hostDeb822))
	want := []AptSource{
		{URI: "http://deb.debian.org/debian", Suites: []string{"bookworm", "bookworm-updates"}},
		{URI: "http://deb.debian.org/debian-security", Suites: []string{"bookworm-security"}},
	}
	if !slices.EqualFunc(got, want, func(a, b AptSource) bool { return a.URI == b.URI && slices.Equal(a.Suites, b.Suites) }) {
		t.Fatalf("got %+v", got)
	}
	multi := ParseDeb822Sources([]byte("Types: deb deb-src\nURIs: http://a.example/debian\n  https://b.example/debian\nSuites: trixie\n"))
	if len(multi) != 2 || multi[1].URI != "https://b.example/debian" {
		t.Errorf("multi-URI stanza: %+v", multi)
	}
}

func TestParseOneLineSources(t *testing.T) {
	got := ParseOneLineSources([]byte(`# comment
deb http://ftp.de.debian.org/debian trixie main contrib
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://mirror.example/debian/ trixie-updates main
deb-src http://ftp.de.debian.org/debian trixie main
deb cdrom:[Debian]/ trixie main
deb [ arch=amd64 ] http://security.debian.org/debian-security trixie-security main
`))
	want := []AptSource{
		{URI: "http://ftp.de.debian.org/debian", Suites: []string{"trixie"}},
		{URI: "https://mirror.example/debian/", Suites: []string{"trixie-updates"}},
		{URI: "http://security.debian.org/debian-security", Suites: []string{"trixie-security"}},
	}
	if !slices.EqualFunc(got, want, func(a, b AptSource) bool { return a.URI == b.URI && slices.Equal(a.Suites, b.Suites) }) {
		t.Fatalf("got %+v", got)
	}
}

func TestPickMirrors(t *testing.T) {
	cases := []struct {
		name string
		srcs []AptSource
		want Mirrors
	}{
		{"host", ParseDeb822Sources([]byte(hostDeb822)), Mirrors{"http://deb.debian.org/debian", "http://deb.debian.org/debian-security"}},
		{"none", nil, Mirrors{DefaultMirror, DefaultSecurityMirror}},
		{"third party only", []AptSource{
			{URI: "https://deb.nodesource.com/node_20.x", Suites: []string{"nodistro"}},
			{URI: "https://packages.cloud.google.com/apt", Suites: []string{"cloud-sdk-bookworm"}},
		}, Mirrors{DefaultMirror, DefaultSecurityMirror}},
		{"local mirror", []AptSource{
			{URI: "https://nodesource.example", Suites: []string{"nodistro"}},
			{URI: "http://apt.corp.example/debian/", Suites: []string{"bookworm-updates"}},
			{URI: "http://apt.corp.example/debian-security", Suites: []string{"bookworm-security"}},
		}, Mirrors{"http://apt.corp.example/debian", "http://apt.corp.example/debian-security"}},
	}
	for _, c := range cases {
		if got := PickMirrors(c.srcs); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestResolveMirrors(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "apt", "sources.list.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"debian.sources":                         strings.ReplaceAll(hostDeb822, "deb.debian.org", "mirror.host.example"),
		"nodesource.sources.disabled-by-farm":    "Types: deb\nURIs: http://other.example/debian\nSuites: trixie\n",
		"google-cloud-sdk.list.disabled-by-farm": "deb http://other.example/debian trixie main\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		mirror, security string
		want             Mirrors
	}{
		{"", "", Mirrors{"http://mirror.host.example/debian", "http://mirror.host.example/debian-security"}},
		{"http://local.example/debian/", "", Mirrors{"http://local.example/debian", ""}},
		{"http://local.example/debian", "http://local.example/sec", Mirrors{"http://local.example/debian", "http://local.example/sec"}},
		{"", NoSecurityMirror, Mirrors{"http://mirror.host.example/debian", ""}},
		{"", "http://sec.example/debian-security", Mirrors{"http://mirror.host.example/debian", "http://sec.example/debian-security"}},
	}
	for _, c := range cases {
		got, err := resolveMirrors(Options{Mirror: c.mirror, SecurityMirror: c.security, AptRoot: root})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("mirror %q security %q: got %+v, want %+v", c.mirror, c.security, got, c.want)
		}
	}
	lines := Mirrors{"http://a/debian", "http://a/sec"}.Lines("trixie")
	want := []string{"deb http://a/debian trixie main", "deb http://a/debian trixie-updates main", "deb http://a/sec trixie-security main"}
	if !slices.Equal(lines, want) {
		t.Errorf("Lines = %q", lines)
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	p := Plan{Flavour: FlavourBase, Suite: "trixie", Packages: []string{"python3", "tini"}}
	args := mmdebstrapArgs(p, Mirrors{Archive: "http://m/debian"}, "/tmp/it's/customize.sh")
	joined := strings.Join(args, "\n")
	for _, want := range []string{
		"--variant=apt", "--include=python3,tini",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
		`--customize-hook=sh '/tmp/it'\''s/customize.sh' "$1" base`,
		"trixie\n-\ndeb http://m/debian trixie main\ndeb http://m/debian trixie-updates main",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "security") {
		t.Errorf("no security mirror expected:\n%s", joined)
	}
	// path-include must follow the path-exclude it refines.
	if slices.Index(args, "--dpkgopt=path-include=/usr/share/doc/*/copyright") < slices.Index(args, "--dpkgopt=path-exclude=/usr/share/doc/*") {
		t.Error("path-include before path-exclude")
	}
}

func TestProgressFilter(t *testing.T) {
	var out bytes.Buffer
	f := newProgressFilter(&out, false)
	now := time.Unix(0, 0)
	f.now = func() time.Time { return now }
	input := strings.Join([]string{
		"I: running apt-get update...",
		"I: running apt-get update...",
		"Get:1 http://deb.debian.org/debian trixie InRelease [140 kB]",
		"Need to get 30.3 MB of archives.",
		"Get:2 http://deb.debian.org/debian trixie/main amd64 tini amd64 0.19.0-1 [1,234 B]",
		"Get:3 http://deb.debian.org/debian trixie/main amd64 python3 amd64 3.13 [2.5 MB]",
		"Unpacking python3 ...",
		"Setting up tini (0.19.0-1) ...",
		"E: some failure",
		"some noise",
	}, "\n")
	f.Consume(strings.NewReader(input))
	got := out.String()
	for _, want := range []string{
		"    I: running apt-get update...\n",
		"    fetched 1 files (140.0 kB)\n",
		"    Need to get 30.3 MB of archives.\n",
		"    fetched 2 files (2.5 MB of 30.3 MB)\n",
		"    E: some failure\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "I: running apt-get update") != 1 {
		t.Errorf("repeated line not deduplicated:\n%s", got)
	}
	if strings.Contains(got, "noise") || strings.Contains(got, "Unpacking") {
		t.Errorf("noise passed through:\n%s", got)
	}
	errs, tail := f.Failure()
	if !slices.Equal(errs, []string{"some failure"}) || !strings.HasSuffix(tail, "some noise") {
		t.Errorf("Failure() = %q, %q", errs, tail)
	}

	var verbose bytes.Buffer
	v := newProgressFilter(&verbose, true)
	v.Consume(strings.NewReader(input))
	if !strings.Contains(verbose.String(), "some noise") {
		t.Error("verbose mode drops lines")
	}
}

func TestFailureHint(t *testing.T) {
	m := Mirrors{Archive: "http://m/debian"}
	cases := map[string]string{
		"Err:1 http://m/debian trixie InRelease\n  Temporary failure resolving 'm'": "unreachable",
		"E: Unable to locate package python3-nope":                                  "cannot be installed",
		"E: command failed: sh '/tmp/x/customize.sh' \"$1\" base":                   "customize hook",
		"something else": "",
	}
	for out, want := range cases {
		got := failureHint(out, m)
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("failureHint(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestParseAptSize(t *testing.T) {
	for in, want := range map[[2]string]int64{
		{"1,234", "B"}: 1234, {"72.4", "kB"}: 72400, {"30.3", "MB"}: 30300000, {"1.5", "GB"}: 1500000000, {"x", "MB"}: 0,
	} {
		if got := parseAptSize(in[0], in[1]); got != want {
			t.Errorf("parseAptSize(%v) = %d, want %d", in, got, want)
		}
	}
}
