package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildShip compiles the static ship binary from the module at moduleDir into
// out, exactly like `make build` (CGO_ENABLED=0 go build -o out ./cmd/ship),
// so that tests get the same bytes, hence the same content tag, as a
// developer's bin/ship.
func BuildShip(ctx context.Context, moduleDir, out string) error {
	return BuildDaemon(ctx, moduleDir, "ship", out)
}

// BuildDaemon compiles the static runtime daemon ./cmd/<name> (ship or gull)
// of the module at moduleDir into out (CGO_ENABLED=0 go build).
func BuildDaemon(ctx context.Context, moduleDir, name, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s (CGO_ENABLED=0 go build ./cmd/%s in %s): %w\n%s", name, name, moduleDir, err, b)
	}
	return nil
}

// ModuleRoot returns the directory of the go.mod at or above dir.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root: no go.mod found")
		}
		dir = parent
	}
}
