// Package version is Shipyard's one version, shared by every binary (bay, ship, gull,
// shipyard) and every place that reports one (bay version, shipyard version, /health, ship's
// and gull's /meta, the MCP server's serverInfo). The Makefile injects it from git:
//
//	go build -ldflags "-X github.com/shipyard-dev/shipyard/internal/version.Version=$(git describe --tags --always --dirty)"
//
// A build without the flag (go test, go run) reports Dev.
package version

// Dev is the version of a build that was not given one.
const Dev = "0.1.0-dev"

// Version is this build's version. A variable, so that -ldflags -X can set it.
var Version = Dev
