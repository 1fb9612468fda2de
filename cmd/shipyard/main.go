// Command shipyard is the Shipyard client: sandboxes, code execution, files, an interactive
// terminal and the MCP server over stdio, all through bay's public HTTP API. See
// internal/cli for the commands and exit codes.
package main

import (
	"os"

	"github.com/shipyard-dev/shipyard/internal/cli"
)

func main() { os.Exit(cli.Main()) }
