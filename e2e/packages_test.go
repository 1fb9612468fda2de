package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/imagebuild"
)

// fullImageOfThisTree returns the content tag of the full image with this tree's ship (built
// when missing; the root filesystem is reused when cached): the test needs this ship's
// environment, whatever ship:latest points at on a machine where others build images too.
func fullImageOfThisTree(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := imagebuild.EnsureTreeImage(ctx, imagebuild.Options{Flavour: imagebuild.FlavourFull, Tag: "ship:e2e-packages",
		KeepOld: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("the full image of this tree could not be built: %v", err)
	}
	return res.ContentTag
}

// probeWheel is a pure-Python wheel of the package shipyard-probe 1.0 with a console script.
func probeWheel(t *testing.T) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"shipyard_probe/__init__.py", "VALUE = 'wheel-ok'\n\ndef main():\n    print('py-script-ok')\n"},
		{"shipyard_probe-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: shipyard-probe\nVersion: 1.0\n"},
		{"shipyard_probe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: shipyard-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"shipyard_probe-1.0.dist-info/entry_points.txt", "[console_scripts]\nshipyard-probe-py = shipyard_probe:main\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("shipyard_probe-1.0.dist-info/RECORD,,\n")
	w, _ := zw.Create("shipyard_probe-1.0.dist-info/RECORD")
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// probeTarball is an npm package tarball of shipyard-probe 1.0.0 with a command.
func probeTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name, body string
		mode       int64
	}{
		{"package/package.json", `{"name":"shipyard-probe","version":"1.0.0","main":"index.js","bin":{"shipyard-probe-js":"cli.js"}}`, 0o644},
		{"package/index.js", "module.exports = 'npm-ok';\n", 0o644},
		{"package/cli.js", "#!/usr/bin/env node\nconsole.log('js-script-ok');\n", 0o755},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// servePackages serves a PEP 503 simple index with the probe wheel and the probe npm tarball
// on addr until the test ends, and returns the bound address.
func servePackages(t *testing.T, addr string) string {
	t.Helper()
	whl, tgz := probeWheel(t), probeTarball(t)
	sum := sha256.Sum256(whl)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/shipyard-probe/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/shipyard_probe-1.0-py3-none-any.whl#sha256=%s">shipyard_probe-1.0-py3-none-any.whl</a></body></html>`, hex.EncodeToString(sum[:]))
	})
	mux.HandleFunc("GET /files/shipyard_probe-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(whl) })
	mux.HandleFunc("GET /npm/shipyard-probe-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(tgz) })
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// An agent's first move: install a package. In a sandbox with network, pip and npm install as
// the sandbox user (uid 1000) from a package index (here a local one the test serves on the
// gateway of a network of the test's, which bay is configured to put sandboxes on, as an
// operator with an internal mirror would), the running kernel imports what pip installed, the
// commands are on PATH, and everything is still there after stop and resume (it lives in the
// workspace).
func TestPipAndNpmInstall(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("shipyard-e2e-pkg-%d", os.Getpid())
	if _, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{"shipyard.test": "e2e"}}); err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
	gw, _ := engineGateway(t, ctx, cli, name)
	index := servePackages(t, net.JoinHostPort(gw.String(), "0"))
	// The network is the operator's: bay's firewall does not guard it (the operator's own
	// rules would), so the sandbox reaches the index on the host.
	b := startBay(t, bayOptions{profiles: strings.ReplaceAll(defaultProfiles, "ship:latest", fullImageOfThisTree(t)),
		env: []string{"BAY_DRIVER__DOCKER__NETWORK=" + name, "BAY_SECURITY__SANDBOX_FIREWALL=false"}})
	id := b.create(map[string]any{"ttl": 900}, nil).Str("id")

	// The kernel runs before anything is installed.
	if got := b.pythonOK(id, "import os; print(os.getuid())"); strings.TrimSpace(got) != "1000" {
		t.Fatalf("kernel uid: %q", got)
	}
	host, _, _ := net.SplitHostPort(index)
	pip := b.shellOK(id, "pip install --no-cache-dir --index-url http://"+index+"/simple/ --trusted-host "+host+" shipyard-probe 2>&1; echo rc=$?")
	if !strings.Contains(pip, "Successfully installed shipyard-probe-1.0") || !strings.HasSuffix(pip, "rc=0") {
		t.Fatalf("pip install:\n%s", pip)
	}
	if got := b.pythonOK(id, "import shipyard_probe; print(shipyard_probe.VALUE, shipyard_probe.__file__)"); !strings.HasPrefix(got, "wheel-ok /workspace/.local/lib/python3") {
		t.Fatalf("the running kernel imports the installed package: %q", got)
	}
	npm := b.shellOK(id, "npm install -g --no-audit --no-fund --no-update-notifier http://"+index+"/npm/shipyard-probe-1.0.0.tgz 2>&1; echo rc=$?")
	if !strings.HasSuffix(npm, "rc=0") {
		t.Fatalf("npm install -g:\n%s", npm)
	}
	local := b.shellOK(id, "mkdir -p proj && cd proj && npm install --no-audit --no-fund --no-update-notifier http://"+index+"/npm/shipyard-probe-1.0.0.tgz >/dev/null 2>&1; node -e \"console.log(require('shipyard-probe'))\"")
	if local != "npm-ok" {
		t.Fatalf("npm install in a project: %q", local)
	}

	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if got := b.pythonOK(id, "import shipyard_probe; print(shipyard_probe.VALUE)"); strings.TrimSpace(got) != "wheel-ok" {
		t.Fatalf("after stop and resume, the kernel imports the package: %q", got)
	}
	if got := b.shellOK(id, "shipyard-probe-py && shipyard-probe-js && id -u"); got != "py-script-ok\njs-script-ok\n1000" {
		t.Fatalf("after stop and resume, the installed commands: %q", got)
	}
}
