// Package version holds the gull runtime version: Shipyard's one version
// (internal/version), injected at build from git by the Makefile.
package version

import "github.com/shipyard-dev/shipyard/internal/version"

// Version is the gull runtime version reported by /health and /meta.
var Version = version.Version
