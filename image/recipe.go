// Package image holds the recipe of the Shipyard sandbox image: the Debian
// package lists per flavour, the mmdebstrap customize hook, the files added on
// top of the root filesystem and the built-in skills. internal/imagebuild
// builds images from it; embedding it makes `bay image build` work from any
// directory and lets the recipe hash cover exactly what is built.
package image

import "embed"

// Files is the recipe tree: packages/*.txt, hooks/customize.sh, files/*,
// skills/<name>/..., the gull flavour's gull/customize.sh and gull/skills/<name>/...,
// and the bay (control plane) flavour's bay/customize.sh (Dockerfile.registry and
// README.md are documentation for people and not part of the hashed recipe).
//
//go:embed packages hooks files skills gull bay
var Files embed.FS
