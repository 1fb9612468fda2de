package imagebuild

import (
	"context"
	"os"
	"path/filepath"
)

// EnsureTreeImage compiles the runtime daemon of opts.Flavour (ship, gull for the gull
// flavour) from the module around the working directory into a temporary file and ensures
// the flavour's image of that binary (EnsureImage; opts.ShipBinary is ignored). Tests use it to
// run the runtime of the tree they test, whatever image the friendly tag points at on a
// machine where others build images too.
func EnsureTreeImage(ctx context.Context, opts Options) (Result, error) {
	wd, err := os.Getwd()
	if err != nil {
		return Result{}, err
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "shipyard-runtime-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	name := opts.Flavour.spec().daemon
	opts.ShipBinary = filepath.Join(dir, name)
	if err := BuildDaemon(ctx, root, name, opts.ShipBinary); err != nil {
		return Result{}, err
	}
	return EnsureImage(ctx, opts)
}
