// Command devbuild runs `image ...` of the bay binary before cmd/bay wires
// it: go run ./image/devbuild build --flavour base.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/shipyard-dev/shipyard/internal/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := imagebuild.Command()
	if err := cmd.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}
