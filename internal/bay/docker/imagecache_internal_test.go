package docker

import (
	"strings"
	"testing"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The image cache is shared by images with one hot-paths key only while they are as `bay image
// build` made them: an image built FROM one of them inherits the label, and gets its own cache.
func TestCacheKeyOfDerivedImages(t *testing.T) {
	key := strings.Repeat("ab", 32)
	inspect := func(labelKey string, layers int) client.ImageInspectResult {
		var res client.ImageInspectResult
		res.ID = "sha256:" + strings.Repeat("cd", 32)
		res.Config = &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: map[string]string{LabelHotPathsKey: labelKey}}}
		res.RootFS = image.RootFS{Type: "layers"}
		for range layers {
			res.RootFS.Layers = append(res.RootFS.Layers, "sha256:"+strings.Repeat("ef", 32))
		}
		return res
	}
	for _, c := range []struct {
		name   string
		res    client.ImageInspectResult
		shared bool
	}{
		{"built: root filesystem and runtime layer", inspect(key, 2), true},
		{"a single layer", inspect(key, 1), true},
		{"derived: FROM ship:latest plus a COPY", inspect(key, 3), false},
		{"no key", inspect("", 2), false},
		{"a key that is not a digest", inspect("../../etc", 2), false},
	} {
		got := cacheKey(c.res)
		if want := map[bool]string{true: key, false: c.res.ID}[c.shared]; got != want {
			t.Errorf("%s: cacheKey = %s, want %s", c.name, got, want)
		}
	}
}
