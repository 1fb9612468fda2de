package imagebuild

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestWriteLayer(t *testing.T) {
	p := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: writeShip(t, "SHIP")})
	var a, b bytes.Buffer
	if err := p.WriteLayer(&a); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteLayer(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("layer is not reproducible")
	}
	var names []string
	for _, e := range readTar(t, a.Bytes()) {
		names = append(names, e.name)
		if e.name == "opt/shipyard/bin/ship" && (e.mode != 0o755 || e.data != "SHIP") {
			t.Errorf("ship entry %+v", e)
		}
	}
	want := []string{
		"opt/", "opt/shipyard/", "opt/shipyard/bin/", "opt/shipyard/bin/ship", "opt/shipyard/matplotlibrc",
		"opt/shipyard/skills/", "opt/shipyard/skills/python-sandbox/",
		"opt/shipyard/skills/python-sandbox/SKILL.md", "opt/shipyard/skills/python-sandbox/extra.txt",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("layer entries:\n%s", strings.Join(names, "\n"))
	}
	// mplconfig (owned by uid 1000 in the rootfs) must not be in the layer.
	if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "mplconfig") }) {
		t.Error("layer touches mplconfig")
	}
}

func TestWriteArchive(t *testing.T) {
	p := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: writeShip(t, "SHIP")})
	base := image.InspectResponse{
		Architecture: "amd64",
		Os:           "linux",
		RootFS:       image.RootFS{Type: "layers", Layers: []string{"sha256:" + strings.Repeat("a", 64)}},
		Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{
			User:       "1000:1000",
			Env:        []string{"LANG=C.UTF-8", "SHIP_IMAGE=stale"},
			Entrypoint: []string{"/usr/bin/tini", "--"},
			Cmd:        []string{"/usr/local/bin/ship"},
			WorkingDir: "/workspace",
			Labels:     map[string]string{LabelRootfsHash: p.RootfsHash},
		}},
	}
	now := time.Unix(1_800_000_000, 0)
	data, err := writeArchive(p, base, now)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	var manifest []archiveManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if !slices.Equal(m.RepoTags, []string{p.ContentTag, p.Tag}) {
		t.Errorf("repo tags %q", m.RepoTags)
	}
	cfgJSON := files[m.Config]
	sum := sha256.Sum256(cfgJSON)
	if m.Config != hex.EncodeToString(sum[:])+".json" {
		t.Errorf("config name %s is not its digest", m.Config)
	}
	var cfg archiveConfig
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 2 || len(cfg.RootFS.DiffIDs) != 2 || cfg.RootFS.DiffIDs[0] != base.RootFS.Layers[0] || len(cfg.History) != 2 {
		t.Fatalf("layers %q diff ids %q history %d", m.Layers, cfg.RootFS.DiffIDs, len(cfg.History))
	}
	// The base layer is referenced, not included; the new one is included
	// and matches its diff ID.
	if _, ok := files[m.Layers[0]]; ok {
		t.Error("base layer included in the archive")
	}
	layer, ok := files[m.Layers[1]]
	if !ok {
		t.Fatalf("new layer %s missing", m.Layers[1])
	}
	lsum := sha256.Sum256(layer)
	if cfg.RootFS.DiffIDs[1] != "sha256:"+hex.EncodeToString(lsum[:]) {
		t.Error("diff id does not match the layer")
	}
	c := cfg.Config
	if c.User != "1000:1000" || c.WorkingDir != "/workspace" || !slices.Equal(c.Cmd, []string{"/usr/local/bin/ship"}) {
		t.Errorf("config lost the runtime settings: %+v", c)
	}
	if !slices.Equal(c.Env, []string{"LANG=C.UTF-8", "SHIP_IMAGE=" + p.ContentTag, "SHIP_SANDBOX_USER=1000:1000"}) {
		t.Errorf("env %q", c.Env)
	}
	if c.Labels[LabelContentTag] != p.ContentTag || c.Labels[LabelRootfsHash] != p.RootfsHash || c.Labels[LabelShipSHA256] != p.ShipSHA256 {
		t.Errorf("labels %v", c.Labels)
	}
	if base.Config.Env[1] != "SHIP_IMAGE=stale" {
		t.Error("base config modified")
	}
	if !cfg.Created.Equal(now) || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("created %v os %s arch %s", cfg.Created, cfg.OS, cfg.Architecture)
	}
}
