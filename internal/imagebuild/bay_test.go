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
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// TestBayFlavourPlan: the bay flavour is the control plane's image: its own small package list
// (no Python, no browser), its own hook, repository and binary, bay as uid 1000 serving on its
// port, and a layer holding the bay binary alone; no privilege separation, no hot paths.
func TestBayFlavourPlan(t *testing.T) {
	pkgs, err := Packages(shipimage.Files, FlavourBay)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ca-certificates", "nftables", "tini"}; !slices.Equal(pkgs, want) {
		t.Errorf("bay packages %v, want %v", pkgs, want)
	}

	bin := writeShip(t, "BAY")
	p := mustPlan(t, Options{Flavour: FlavourBay, ShipBinary: bin})
	if p.Tag != "bay:latest" || !isContentTag(p.ContentTag, BayImageRepo, FlavourBay) || !isContentTag(p.RootfsTag, RootfsRepo, FlavourBay) {
		t.Errorf("tags %s %s %s", p.Tag, p.ContentTag, p.RootfsTag)
	}
	df := p.Dockerfile()
	// Not BAY_IMAGE: bay reads every BAY_* variable as a configuration key and refuses unknown ones.
	if !strings.Contains(df, "ENV SHIPYARD_BAY_IMAGE="+p.ContentTag) || strings.Contains(df, "ENV BAY_") ||
		strings.Contains(df, " SHIP_IMAGE") || strings.Contains(df, "SHIP_SANDBOX_USER") {
		t.Errorf("Dockerfile:\n%s", df)
	}
	labels := p.Labels()
	for _, l := range []string{LabelHotPaths, LabelRuntimeCaps} {
		if _, ok := labels[l]; ok {
			t.Errorf("bay image has label %s: %v", l, labels)
		}
	}
	changes := strings.Join(FlavourBay.spec().changes, "\n")
	for _, want := range []string{"USER 1000:1000", "EXPOSE 8114/tcp", "ENV BAY_DATA_DIR=/var/lib/bay", `CMD ["serve"]`,
		`ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/bay"]`} {
		if !strings.Contains(changes, want) {
			t.Errorf("bay rootfs changes lack %q", want)
		}
	}
	// A BAY_* variable in the image would beat the operator's config file.
	for _, c := range FlavourBay.spec().changes {
		if strings.HasPrefix(c, "ENV BAY_") && c != "ENV BAY_DATA_DIR=/var/lib/bay" {
			t.Errorf("bay image sets %s, which would override config.yaml", c)
		}
	}

	// bay started with the image's environment accepts it (every BAY_* variable is a config key).
	var env []string
	for _, line := range append(slices.Clone(FlavourBay.spec().changes), strings.Split(df, "\n")...) {
		if v, ok := strings.CutPrefix(line, "ENV "); ok {
			env = append(env, v)
		}
	}
	if _, err := config.Load(config.LoadOptions{Env: env, SearchPaths: []string{}}); err != nil {
		t.Errorf("bay refuses its image's environment %v: %v", env, err)
	}

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
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
	if !slices.Equal(names, []string{"opt/shipyard/bin/bay"}) {
		t.Errorf("bay layer holds %v, want the bay binary alone", names)
	}
	if opts, err := (Options{Flavour: FlavourBay}).withDefaults(); err != nil || opts.ShipBinary != DefaultBayBinary {
		t.Errorf("default bay binary %q, %v", opts.ShipBinary, err)
	}
	// The sandbox flavours' tags do not move because a bay flavour exists.
	base := mustPlan(t, Options{Flavour: FlavourBase, ShipBinary: writeShip(t, "SHIP")})
	if base.RootfsTag == p.RootfsTag || base.ContentTag == p.ContentTag {
		t.Errorf("bay shares tags with base: %s %s", base.RootfsTag, base.ContentTag)
	}
}
