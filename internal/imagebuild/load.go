package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
)

// The last step has two implementations with the same result:
//
//   - loadImage (default): an ImageLoad of a docker-archive whose manifest
//     lists the root filesystem's layers, which the engine already has and
//     therefore does not need in the archive, plus one new layer with
//     /opt/shipyard. No container is created or committed: about a second.
//   - buildImage: a classic-builder ImageBuild FROM the root filesystem. The
//     builder commits a container per instruction, and each commit diffs the
//     whole tree on engines whose storage driver has no native diff (here
//     fuse-overlayfs): 20-25 s per instruction on the full image. It is the
//     fallback when the engine refuses the archive (e.g. an image store that
//     wants every layer blob).

// archiveConfig is the image config JSON of a docker-archive (the fields
// Docker's loader reads).
type archiveConfig struct {
	Architecture string                          `json:"architecture"`
	OS           string                          `json:"os"`
	Variant      string                          `json:"variant,omitempty"`
	Created      time.Time                       `json:"created"`
	Config       dockerspec.DockerOCIImageConfig `json:"config"`
	RootFS       archiveRootFS                   `json:"rootfs"`
	History      []archiveHistory                `json:"history"`
}

type archiveRootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type archiveHistory struct {
	Created    time.Time `json:"created"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Comment    string    `json:"comment,omitempty"`
	EmptyLayer bool      `json:"empty_layer,omitempty"`
}

type archiveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// finalConfig derives the final image config from the root filesystem image:
// its runtime configuration plus SHIP_IMAGE, SHIP_SANDBOX_USER and the labels.
func finalConfig(plan Plan, base image.InspectResponse, layerDiffID string, now time.Time) (archiveConfig, error) {
	if base.Config == nil || len(base.RootFS.Layers) == 0 {
		return archiveConfig{}, fmt.Errorf("root filesystem image %s has no config or layers", plan.RootfsTag)
	}
	cfg := *base.Config
	spec := plan.Flavour.spec()
	cfg.Env = slices.DeleteFunc(slices.Clone(cfg.Env), func(e string) bool {
		return strings.HasPrefix(e, spec.imageEnv+"=") || strings.HasPrefix(e, "SHIP_SANDBOX_USER=")
	})
	cfg.Env = append(cfg.Env, spec.imageEnv+"="+plan.ContentTag)
	if spec.sandboxUser != "" {
		cfg.Env = append(cfg.Env, "SHIP_SANDBOX_USER="+spec.sandboxUser)
	}
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, plan.Labels())
	cfg.Labels = labels

	out := archiveConfig{
		Architecture: base.Architecture,
		OS:           base.Os,
		Variant:      base.Variant,
		Created:      now.UTC(),
		Config:       cfg,
		RootFS:       archiveRootFS{Type: "layers", DiffIDs: append(slices.Clone(base.RootFS.Layers), layerDiffID)},
	}
	for range base.RootFS.Layers {
		out.History = append(out.History, archiveHistory{Created: now.UTC(), CreatedBy: "mmdebstrap " + plan.Suite + " (" + plan.RootfsTag + ")"})
	}
	out.History = append(out.History, archiveHistory{Created: now.UTC(), CreatedBy: "shipyard imagebuild: /opt/shipyard (ship, skills, matplotlibrc), SHIP_IMAGE, labels"})
	return out, nil
}

// writeArchive writes the docker-archive: manifest.json, the config and the
// new layer only.
func writeArchive(plan Plan, base image.InspectResponse, now time.Time) ([]byte, error) {
	var layer bytes.Buffer
	if err := plan.WriteLayer(&layer); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	cfg, err := finalConfig(plan, base, diffID, now)
	if err != nil {
		return nil, err
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode image config: %w", err)
	}
	cfgSum := sha256.Sum256(cfgJSON)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"

	m := archiveManifest{Config: cfgName, RepoTags: []string{plan.ContentTag}}
	if plan.Tag != plan.ContentTag {
		m.RepoTags = append(m.RepoTags, plan.Tag)
	}
	for _, d := range cfg.RootFS.DiffIDs {
		m.Layers = append(m.Layers, strings.TrimPrefix(d, "sha256:")+"/layer.tar")
	}
	manifest, err := json.Marshal([]archiveManifest{m})
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	newLayerDir := strings.TrimPrefix(diffID, "sha256:")
	entries := []struct {
		name string
		data []byte
	}{
		{cfgName, cfgJSON},
		{newLayerDir + "/layer.tar", layer.Bytes()},
		{"manifest.json", manifest},
	}
	mtime := time.Unix(plan.sourceDateEpoch, 0)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: newLayerDir + "/", Mode: 0o755, ModTime: mtime}); err != nil {
		return nil, fmt.Errorf("write image archive: %w", err)
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: mtime}); err != nil {
			return nil, fmt.Errorf("write image archive: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("write image archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write image archive: %w", err)
	}
	return buf.Bytes(), nil
}

// loadImage adds the /opt/shipyard layer to the root filesystem through
// ImageLoad (see the comment at the top of this file).
func (b *builder) loadImage(ctx context.Context, plan Plan) error {
	base, err := b.engine.ImageInspect(ctx, plan.RootfsTag)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", plan.RootfsTag, err)
	}
	archive, err := writeArchive(plan, base.InspectResponse, time.Now())
	if err != nil {
		return err
	}
	resp, err := b.engine.ImageLoad(ctx, bytes.NewReader(archive), client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("image load: %w", err)
	}
	defer resp.Close()
	if _, err := decodeStream(resp, nil); err != nil {
		return fmt.Errorf("image load: %w", err)
	}
	return nil
}
