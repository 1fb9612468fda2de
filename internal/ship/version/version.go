// Package version holds the ship runtime version: Shipyard's one version
// (internal/version), injected at build from git by the Makefile.
package version

import "github.com/shipyard-dev/shipyard/internal/version"

// Version is the ship runtime version reported by /health, /stat and /meta.
var Version = version.Version
