package docker

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// The engine's refusal of an unknown runtime, as Docker 20.10 and later engines word it, is
// recognised; other invalid arguments and a create without a runtime are not.
func TestRuntimeRefused(t *testing.T) {
	invalid := func(msg string) error { return errors.Join(cerrdefs.ErrInvalidArgument, errors.New(msg)) }
	for _, tc := range []struct {
		rt   string
		err  error
		want bool
	}{
		{"runsc", invalid("Error response from daemon: Unknown runtime specified runsc"), true},
		{"runsc", invalid("Error response from daemon: unknown or invalid runtime name: runsc"), true},
		{"runsc", invalid("invalid mount config"), false},
		{"runsc", errors.New("unknown runtime specified runsc"), false}, // not the engine's 400
		{"", invalid("Unknown runtime specified runc"), false},
	} {
		if got := runtimeRefused(tc.rt, tc.err); got != tc.want {
			t.Errorf("runtimeRefused(%q, %v) = %v, want %v", tc.rt, tc.err, got, tc.want)
		}
	}
}

// TestEngineRefusesAnUnknownRuntime asks the real engine to create a container of an image it
// has under a runtime it lacks: the refusal is what runtimeRefused recognises.
func TestEngineRefusesAnUnknownRuntime(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	images, err := d.cli.ImageList(ctx, client.ImageListOptions{})
	image := ""
	for _, im := range images.Items {
		if len(im.RepoTags) > 0 {
			image = im.RepoTags[0]
			break
		}
	}
	if err != nil || image == "" {
		t.Fatalf("no tagged image on the engine to create from: %v", err)
	}
	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Labels: map[string]string{"dev.shipyard.test": "runtime"}},
		HostConfig: &container.HostConfig{Runtime: "shipyard-no-such-runtime"},
	})
	if err == nil {
		_, _ = d.cli.ContainerRemove(context.WithoutCancel(ctx), res.ID, client.ContainerRemoveOptions{Force: true})
	}
	if err == nil || !runtimeRefused("shipyard-no-such-runtime", err) {
		t.Fatalf("create under a missing runtime: %v", err)
	}
}
