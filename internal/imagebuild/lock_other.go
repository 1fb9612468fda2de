//go:build !unix

package imagebuild

import "context"

// lockFlavour is a no-op where flock is not available.
func lockFlavour(context.Context, Flavour, func()) (func(), error) { return func() {}, nil }
