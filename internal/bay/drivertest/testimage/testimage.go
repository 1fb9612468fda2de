// Package testimage builds the tiny image the driver conformance suite runs against a real
// Docker engine. There is no registry here and the engine starts empty, so the image is made
// from nothing: a static Go HTTP server (./server, compiled with CGO_ENABLED=0) in a tar
// imported through the Engine API (ImageImport), no base image, no builder.
//
// The image is tagged by a hash of its recipe (server source, Go version, architecture) and
// reused when present, so only the first run on a machine pays the build (about 2-5 s).
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

//go:embed server/main.go
var serverSource []byte

// Repository is the repository name of the test image; the tag is a recipe hash.
const Repository = "shipyard-drivertest"

// Port is the port the image's server listens on (unless PORT is set in its environment).
const Port = 8123

// Tag returns the image reference for the current recipe.
func Tag() string {
	h := sha256.New()
	h.Write(serverSource)
	fmt.Fprintf(h, "\x00%s\x00%s", runtime.Version(), runtime.GOARCH)
	return Repository + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// Ensure returns the tag of the test image, building and importing it if the engine does not
// have it yet.
func Ensure(ctx context.Context, cli *client.Client) (string, error) {
	return ensure(ctx, cli, Tag(), variant{})
}

// HotPath is the directory the EnsureHotPaths variant declares as its hot path; HotFile in it
// holds HotContent.
const (
	HotPath    = "/lib/hot"
	HotFile    = HotPath + "/marker.txt"
	HotContent = "served from the image cache"
)

// EnsureHotPaths returns the tag of a variant that declares HotPath in the image label the
// Docker driver's image cache reads (labelHotPaths), building it when missing.
func EnsureHotPaths(ctx context.Context, cli *client.Client, labelHotPaths string) (string, error) {
	return ensure(ctx, cli, Tag()+"-hot", variant{hotLabel: labelHotPaths})
}

// EnsureLabelled returns the tag of a variant carrying the image label key=value, building it
// when missing.
func EnsureLabelled(ctx context.Context, cli *client.Client, key, value string) (string, error) {
	sum := sha256.Sum256([]byte(key + "=" + value))
	return ensure(ctx, cli, Tag()+"-label-"+hex.EncodeToString(sum[:4]), variant{label: [2]string{key, value}})
}

// variant is what an image adds to the base test image.
type variant struct {
	workspaceFiles int       // empty files in /workspace
	hotLabel       string    // label key naming HotPath as a hot path; "" = none
	label          [2]string // one more label (key, value); "" key = none
}

// EnsureSlowCopyUp returns the tag of a variant whose /workspace holds n empty files, building
// it when missing. A fresh volume mounted there gets those files copied in while the container
// is created, which makes the create take long enough (about 1 s for 5000 files) to act on a
// container whose create is still under way.
func EnsureSlowCopyUp(ctx context.Context, cli *client.Client, n int) (string, error) {
	return ensure(ctx, cli, fmt.Sprintf("%s-copyup-%d", Tag(), n), variant{workspaceFiles: n})
}

func ensure(ctx context.Context, cli *client.Client, tag string, v variant) (string, error) {
	_, err := cli.ImageInspect(ctx, tag)
	if err == nil {
		return tag, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", tag, err)
	}
	bin, err := buildServer(ctx)
	if err != nil {
		return "", err
	}
	layer, err := rootfs(bin, v)
	if err != nil {
		return "", err
	}
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, tag,
		client.ImageImportOptions{
			Message: "shipyard driver conformance test image",
			Changes: changes(v),
		})
	if err != nil {
		return "", fmt.Errorf("import image %s: %w", tag, err)
	}
	defer rc.Close()
	if err := readStream(rc); err != nil {
		return "", fmt.Errorf("import image %s: %w", tag, err)
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return "", fmt.Errorf("inspect imported image %s: %w", tag, err)
	}
	return tag, nil
}

// buildServer compiles ./server statically for linux and returns the binary.
func buildServer(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "shipyard-drivertest-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), serverSource, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module drivertestserver\n\ngo 1.22\n"), 0o644); err != nil {
		return nil, err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // fallback only
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", "server", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build drivertest server: %w\n%s", err, out)
	}
	return os.ReadFile(filepath.Join(dir, "server"))
}

func changes(v variant) []string {
	out := []string{
		`ENTRYPOINT ["/server"]`,
		fmt.Sprintf("EXPOSE %d/tcp", Port),
		"LABEL shipyard.drivertest=true",
	}
	if v.hotLabel != "" {
		out = append(out, fmt.Sprintf("LABEL %s=%s", v.hotLabel, HotPath))
	}
	if v.label[0] != "" {
		out = append(out, fmt.Sprintf("LABEL %s=%s", v.label[0], v.label[1]))
	}
	return out
}

// rootfs returns the image's only layer: /server, a /workspace owned by uid 1000 (a fresh named
// volume mounted there copies that ownership) holding v.workspaceFiles empty files, a
// world-writable /tmp, and with v.hotLabel HotPath holding HotFile.
func rootfs(bin []byte, v variant) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	entries := []tar.Header{
		{Name: "server", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg},
		{Name: "workspace/", Mode: 0o755, Uid: 1000, Gid: 1000, Typeflag: tar.TypeDir},
		{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir},
		{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir},
	}
	if v.hotLabel != "" {
		entries = append(entries,
			tar.Header{Name: "lib/", Mode: 0o755, Typeflag: tar.TypeDir},
			tar.Header{Name: strings.TrimPrefix(HotPath, "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir},
			tar.Header{Name: strings.TrimPrefix(HotFile, "/"), Mode: 0o644, Size: int64(len(HotContent)), Typeflag: tar.TypeReg})
	}
	for i := range v.workspaceFiles {
		entries = append(entries, tar.Header{Name: fmt.Sprintf("workspace/f%06d", i), Mode: 0o644, Uid: 1000, Gid: 1000, Typeflag: tar.TypeReg})
	}
	for _, h := range entries {
		h.ModTime, h.Format = mtime, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if h.Name == strings.TrimPrefix(HotFile, "/") {
			if _, err := io.WriteString(tw, HotContent); err != nil {
				return nil, err
			}
		}
		if h.Name == "server" {
			if _, err := tw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readStream drains an engine progress stream and returns the first error message in it.
func readStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}
