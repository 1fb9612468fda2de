package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	shipimage "github.com/shipyard-dev/shipyard/image"
)

// TestGullFlavourPlan: the gull flavour has its own package list (no Python,
// no Node), hook, skills, repository, port and binary, and leaves the ship
// flavours' hashes alone.
func TestGullFlavourPlan(t *testing.T) {
	pkgs, err := Packages(shipimage.Files, FlavourGull)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"chromium-headless-shell", "fonts-liberation", "fonts-dejavu-core", "fonts-noto-cjk", "tini", "ca-certificates"} {
		if !slices.Contains(pkgs, p) {
			t.Errorf("gull lacks %s", p)
		}
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, "python") || p == "nodejs" || p == "npm" {
			t.Errorf("gull must not contain %s", p)
		}
	}

	gull := writeShip(t, "GULL")
	p := mustPlan(t, Options{Flavour: FlavourGull, ShipBinary: gull})
	if p.Tag != "gull:latest" || !isContentTag(p.ContentTag, GullImageRepo, FlavourGull) || !isContentTag(p.RootfsTag, RootfsRepo, FlavourGull) {
		t.Errorf("tags %s %s %s", p.Tag, p.ContentTag, p.RootfsTag)
	}
	if !strings.Contains(p.Dockerfile(), "ENV GULL_IMAGE="+p.ContentTag) || strings.Contains(p.Dockerfile(), "SHIP_IMAGE") {
		t.Errorf("Dockerfile:\n%s", p.Dockerfile())
	}
	if _, ok := p.Labels()[LabelHotPaths]; ok {
		t.Errorf("gull has hot paths: %v", p.Labels())
	}
	changes := strings.Join(FlavourGull.spec().changes, "\n")
	for _, want := range []string{"USER 1000:1000", "EXPOSE 8115/tcp", `CMD ["/usr/local/bin/gull"]`, "WORKDIR /workspace"} {
		if !strings.Contains(changes, want) {
			t.Errorf("gull rootfs changes lack %q", want)
		}
	}

	// The added layer: the gull binary and the browser skill, nothing of ship's.
	var layer bytes.Buffer
	if err := p.WriteLayer(&layer); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&layer)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"opt/shipyard/bin/gull", "opt/shipyard/skills/browser-automation/SKILL.md", "opt/shipyard/skills/browser-automation/references/browser.md"} {
		if !slices.Contains(names, want) {
			t.Errorf("layer lacks %s: %v", want, names)
		}
	}
	for _, n := range names {
		if strings.Contains(n, "python-sandbox") || strings.Contains(n, "matplotlibrc") || strings.HasSuffix(n, "/ship") {
			t.Errorf("gull layer has %s", n)
		}
	}

	// The ship flavours do not get the browser skill.
	base := mustPlan(t, Options{Flavour: FlavourBase, ShipBinary: writeShip(t, "SHIP")})
	files, err := base.addedFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f.name, "browser-automation") || strings.HasSuffix(f.name, "/gull") {
			t.Errorf("base image gets %s", f.name)
		}
	}
	if opts, err := (Options{Flavour: FlavourGull}).withDefaults(); err != nil || opts.ShipBinary != DefaultGullBinary {
		t.Errorf("default gull binary %q, %v", opts.ShipBinary, err)
	}
}
