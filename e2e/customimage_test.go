package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// A custom image as docs/operations.md ("Custom images") describes it: a Dockerfile FROM the
// sandbox image, built by the engine itself (classic builder, no registry, no network), named by
// a profile. Its sandboxes see what it added: a file, and a Python module in the directory
// Debian's python3-* packages install into (/usr/lib/python3/dist-packages, one of the image's
// hot paths: the driver's cache of the parent image must not hide it).
func TestCustomImageFromShip(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	tag := "shipyard-e2e-custom:" + randHex(t)
	dockerfile := fmt.Sprintf("FROM %s\nCOPY rootfs/ /\n", testImage)
	files := map[string]string{
		"Dockerfile":                  dockerfile,
		"rootfs/opt/custom/hello.txt": "hello from the custom image\n",
		"rootfs/usr/lib/python3/dist-packages/shipyard_custom.py": "GREETING = 'custom module loaded'\n",
	}
	id := buildImage(t, cli, tag, files)
	t.Cleanup(func() { removeImageAndCache(t, cli, tag, id) })

	b := startBay(t, bayOptions{profiles: fmt.Sprintf(`profiles:
  - id: python-default
    image: %q
    capabilities: [filesystem, shell, python]
  - id: custom
    image: %q
    capabilities: [filesystem, shell, python]
`, testImage, tag)})
	// A sandbox of the parent image first: its image cache is then ready, and a derived image
	// sharing its cache key would be run with the parent's Python directories mounted over its own.
	parent := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")
	b.pythonOK(parent, "import json")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	waitKeeper(ctx, t, cli, testImage)

	sb := b.create(map[string]any{"profile": "custom"}, nil).Str("id")
	if got := b.shellOK(sb, "cat /opt/custom/hello.txt && id -u"); got != "hello from the custom image\n1000" {
		t.Errorf("shell in the custom image: %q", got)
	}
	if got := b.pythonOK(sb, "import shipyard_custom\nprint(shipyard_custom.GREETING)"); !strings.Contains(got, "custom module loaded") {
		t.Errorf("python in the custom image: %q", got)
	}
	// The parent's sandboxes do not see the child's additions.
	if r := b.python(parent, "import shipyard_custom"); strings.Contains(r.String(), "custom module loaded") || !strings.Contains(r.String(), "ModuleNotFoundError") {
		t.Errorf("the parent image's sandbox imports the custom module: %s", r)
	}
}

// buildImage builds files (a Dockerfile and its context) with the engine's classic builder,
// without network, and returns the image id.
func buildImage(t *testing.T, cli *client.Client, tag string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true,
		NetworkMode: network.NetworkNone, Version: build.BuilderV1})
	if err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
	defer res.Body.Close()
	var log strings.Builder
	dec := json.NewDecoder(res.Body)
	for {
		var m struct {
			Stream string
			Error  string
			Aux    struct{ ID string }
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("build %s: %v\n%s", tag, err, log.String())
		}
		if m.Error != "" {
			t.Fatalf("build %s: %s\n%s", tag, m.Error, log.String())
		}
		log.WriteString(m.Stream)
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, log.String())
	}
	return ins.ID
}

// waitKeeper waits until the driver's image cache of image is ready (its keeper container
// exists); an engine without the cache (kernel overlayfs) has none, and the wait ends at once.
func waitKeeper(ctx context.Context, t *testing.T, cli *client.Client, image string) {
	t.Helper()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := info.Info.Driver; d != "fuse-overlayfs" && d != "vfs" {
		return
	}
	ins, err := cli.ImageInspect(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	key := ins.Config.Labels["dev.shipyard.image.hot-paths-key"]
	if key == "" {
		key = strings.TrimPrefix(ins.ID, "sha256:")
	}
	for {
		l, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "dev.shipyard.image-cache.key="+key)})
		if err == nil && len(l.Items) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no image cache keeper for %s (key %s): %v", image, key[:12], err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// removeImageAndCache removes a test image and the image cache a bay made of it. A keeper can
// appear while this runs (a bay warming its images' caches, or removing a keeper at the same
// moment), so keepers and volumes are removed in rounds until none is left.
func removeImageAndCache(t *testing.T, cli *client.Client, tag, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := id // an image without a shared cache key is cached under its id
	byKey := make(client.Filters).Add("label", "dev.shipyard.image-cache.key="+key)
	var last error
	for {
		last = nil
		keepers, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: byKey})
		if err != nil {
			last = err
		} else {
			for _, k := range keepers.Items {
				if _, err := cli.ContainerRemove(ctx, k.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
					last = fmt.Errorf("remove the image cache keeper of %s: %w", tag, err)
				}
			}
		}
		vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: byKey})
		if err != nil {
			last = err
		} else {
			for _, v := range vols.Items {
				if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
					last = fmt.Errorf("remove the image cache volume %s: %w", v.Name, err)
				}
			}
		}
		if last == nil {
			if _, err := cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{PruneChildren: true}); err == nil || cerrdefs.IsNotFound(err) {
				return
			} else {
				last = fmt.Errorf("remove %s: %w", tag, err)
			}
		}
		if ctx.Err() != nil {
			t.Error(last)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
