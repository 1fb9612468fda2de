package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// exampleKey is the API key of the in-process bay the examples run against.
const exampleKey = "sk-examples-0123456789abcdef"

// TestMain runs the package's tests and examples with an in-process bay: the daemon itself
// (HTTP API, authentication, SQLite, the sandbox lifecycle) on a loopback port, with the fake
// container driver the unit tests use and a ship stub whose python runs each cell with the
// host's python3 (a fresh interpreter per cell, not a kernel). SHIPYARD_ENDPOINT and
// SHIPYARD_TOKEN name it, so the examples read like a program's code (sdk.NewFromEnv).
func TestMain(m *testing.M) {
	os.Exit(runWithBay(m))
}

func runWithBay(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sdk-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stub := shipstub.New()
	defer stub.Close()
	stub.Python = func(req shipapi.ExecPythonRequest) (int, any) {
		out, err := exec.Command("python3", "-c", req.Code).CombinedOutput()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			return 200, shipapi.ExecPythonResponse{Error: &msg}
		}
		return 200, shipapi.ExecPythonResponse{Success: true, Output: shipapi.PythonOutput{Text: strings.TrimSuffix(string(out), "\n")}}
	}
	cfg := config.DefaultConfig()
	cfg.Database.URL = "sqlite:///" + filepath.Join(dir, "bay.db")
	cfg.Security.APIKey = exampleKey
	cfg.GC.RunOnStartup = false
	cfg.WarmPool.RunOnStartup = false
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := &app.Main{Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir}, Version: "examples",
		Driver: fake.New(fake.WithEndpointFunc(func(string, bay.ContainerSpec) string { return stub.URL() })),
		Log:    slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	select {
	case <-b.Ready():
	case err := <-done:
		fmt.Fprintln(os.Stderr, "in-process bay:", err)
		cancel()
		return 1
	}
	os.Setenv("SHIPYARD_ENDPOINT", "http://"+b.ListenAddr())
	os.Setenv("SHIPYARD_TOKEN", exampleKey)
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "in-process bay:", err)
		return 1
	}
	return code
}
