package imagebuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Fallback mirrors when the host's apt sources name none.
const (
	DefaultMirror         = "http://deb.debian.org/debian"
	DefaultSecurityMirror = "http://deb.debian.org/debian-security"
)

// debianSuites are the suite names that identify a Debian archive entry in
// the host's sources (other repositories, e.g. nodesource "nodistro", are
// ignored).
var debianSuites = []string{
	"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
	"oldoldstable", "oldstable", "stable", "testing", "unstable", "experimental",
}

// AptSource is one (type deb) entry of the host's apt configuration.
type AptSource struct {
	URI    string
	Suites []string
}

// Mirrors are the archive URLs mmdebstrap uses.
type Mirrors struct {
	// Archive serves <suite> and <suite>-updates.
	Archive string
	// Security serves <suite>-security; empty means none.
	Security string
}

// Lines returns the sources.list lines for mmdebstrap's MIRROR arguments.
func (m Mirrors) Lines(suite string) []string {
	lines := []string{
		fmt.Sprintf("deb %s %s main", m.Archive, suite),
		fmt.Sprintf("deb %s %s-updates main", m.Archive, suite),
	}
	if m.Security != "" {
		lines = append(lines, fmt.Sprintf("deb %s %s-security main", m.Security, suite))
	}
	return lines
}

// resolveMirrors applies the precedence: explicit options, then the host's
// apt sources, then deb.debian.org. An explicit Mirror without
// SecurityMirror means no security suite (it is likely a local mirror).
func resolveMirrors(opts Options) (Mirrors, error) {
	m := Mirrors{Archive: strings.TrimRight(opts.Mirror, "/"), Security: strings.TrimRight(opts.SecurityMirror, "/")}
	if m.Security == NoSecurityMirror {
		m.Security = ""
		if m.Archive != "" {
			return m, nil
		}
	} else if m.Archive != "" {
		return m, nil
	}
	srcs, err := HostAptSources(opts.AptRoot)
	if err != nil {
		return Mirrors{}, err
	}
	host := PickMirrors(srcs)
	if m.Archive == "" {
		m.Archive = host.Archive
	}
	if m.Security == "" && opts.SecurityMirror != NoSecurityMirror {
		m.Security = host.Security
	}
	return m, nil
}

// PickMirrors chooses the Debian archive and security URIs among the host's
// sources: the first entry with a Debian suite (or a URI ending in /debian)
// and, for security, the first entry with a -security suite. Missing ones
// default to deb.debian.org.
func PickMirrors(srcs []AptSource) Mirrors {
	var m Mirrors
	for _, s := range srcs {
		for _, suite := range s.Suites {
			base, sfx, _ := strings.Cut(suite, "-")
			if !slices.Contains(debianSuites, base) {
				continue
			}
			uri := strings.TrimRight(s.URI, "/")
			switch {
			case sfx == "security" || strings.HasSuffix(uri, "-security"):
				if m.Security == "" {
					m.Security = uri
				}
			case sfx == "" || sfx == "updates" || sfx == "backports":
				if m.Archive == "" {
					m.Archive = uri
				}
			}
		}
	}
	if m.Archive == "" {
		m.Archive = DefaultMirror
	}
	if m.Security == "" {
		m.Security = DefaultSecurityMirror
	}
	return m
}

// HostAptSources reads the deb entries of <root>/etc/apt/sources.list,
// sources.list.d/*.list and sources.list.d/*.sources (deb822), skipping
// disabled ones and URI schemes mmdebstrap cannot use from the host.
func HostAptSources(root string) ([]AptSource, error) {
	var files []string
	base := filepath.Join(root, "etc", "apt")
	if _, err := os.Stat(filepath.Join(base, "sources.list")); err == nil {
		files = append(files, filepath.Join(base, "sources.list"))
	}
	entries, err := os.ReadDir(filepath.Join(base, "sources.list.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read host apt sources: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
			files = append(files, filepath.Join(base, "sources.list.d", n))
		}
	}
	var out []AptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read host apt sources: %w", err)
		}
		if strings.HasSuffix(f, ".sources") {
			out = append(out, ParseDeb822Sources(data)...)
		} else {
			out = append(out, ParseOneLineSources(data)...)
		}
	}
	return out, nil
}

func usableURI(u string) bool {
	for _, p := range []string{"http://", "https://", "file:/"} {
		if strings.HasPrefix(strings.ToLower(u), p) {
			return true
		}
	}
	return false
}

// ParseOneLineSources parses the one-line format:
// `deb [options] URI suite [component...]`.
func ParseOneLineSources(data []byte) []AptSource {
	var out []AptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, possibly with spaces
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) < 2 || !usableURI(f[0]) {
			continue
		}
		out = append(out, AptSource{URI: f[0], Suites: []string{f[1]}})
	}
	return out
}

// ParseDeb822Sources parses the deb822 format (stanzas of Types, URIs,
// Suites, Enabled fields separated by blank lines).
func ParseDeb822Sources(data []byte) []AptSource {
	var out []AptSource
	fields := map[string]string{}
	var last string
	flush := func() {
		defer clear(fields)
		if len(fields) == 0 || strings.EqualFold(fields["enabled"], "no") {
			return
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") {
			return
		}
		suites := strings.Fields(fields["suites"])
		for _, u := range strings.Fields(fields["uris"]) {
			if usableURI(u) && len(suites) > 0 {
				out = append(out, AptSource{URI: u, Suites: suites})
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
			last = ""
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t': // continuation
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
