// Package version holds the ship runtime version. Override it at link time:
//
//	go build -ldflags "-X github.com/shipyard-dev/shipyard/internal/ship/version.Version=1.2.3" ./cmd/ship
package version

// Version is the ship runtime version reported by /health, /stat and /meta.
// It is a variable (not a constant) so -ldflags -X can set it.
var Version = "0.1.0-dev"
