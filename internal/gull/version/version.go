// Package version holds the gull runtime version. Override it at link time:
//
//	go build -ldflags "-X github.com/shipyard-dev/shipyard/internal/gull/version.Version=1.2.3" ./cmd/gull
package version

// Version is the gull runtime version reported by /health and /meta. It is a
// variable (not a constant) so -ldflags -X can set it.
var Version = "0.1.0-dev"
