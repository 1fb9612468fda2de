// Package inproc runs a whole bay (HTTP API, lifecycle service, SQLite file, Docker driver)
// inside a benchmark program, on a loopback port, with a generated configuration in a
// temporary directory. It is kept apart from package benchlib so that the programs that run
// bay as a subprocess do not link bay's implementation.
package inproc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/shipyard-dev/shipyard/internal/bay/app"
)

// Options describe one in-process bay.
type Options struct {
	// TempPrefix names the temporary data directory (os.MkdirTemp pattern).
	TempPrefix string
	// Config renders config.yaml given the data directory (where bay.db goes).
	Config func(dir string) string
	// LogPath is the file bay's JSON logs are written to (created or truncated).
	LogPath string
	// LogLevel is the lowest level logged (zero value: info).
	LogLevel slog.Level
}

// Bay is a bay run in this process. New prepares it, the caller may then set more fields of
// Main (Store, Tune, ...), Start runs it, Stop stops it and Close removes what New made.
type Bay struct {
	// Main is the daemon: ConfigFile, Env (BAY_DATA_DIR=Dir), Addr 127.0.0.1:0 and Log are set.
	Main *app.Main
	// Dir is the temporary data directory; Close removes it.
	Dir string

	logs *os.File
	stop context.CancelFunc
	done chan error
}

// New creates the data directory, writes config.yaml into it and opens the log file. On
// error nothing is left behind.
func New(opts Options) (*Bay, error) {
	dir, err := os.MkdirTemp("", opts.TempPrefix)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(opts.Config(dir)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logs, err := os.Create(opts.LogPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Bay{
		Main: &app.Main{ConfigFile: cfgPath, Env: []string{"BAY_DATA_DIR=" + dir}, Addr: "127.0.0.1:0",
			Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: opts.LogLevel}))},
		Dir:  dir,
		logs: logs,
	}, nil
}

// Start runs Main until ctx ends or Stop is called, and returns once it listens (URL is
// valid then), or with bay's error if it fails before that.
func (b *Bay) Start(ctx context.Context) error {
	ctx, b.stop = context.WithCancel(ctx)
	b.done = make(chan error, 1)
	go func() { b.done <- b.Main.Run(ctx) }()
	select {
	case <-b.Main.Ready():
		return nil
	case err := <-b.done:
		b.done <- err // Stop waits for it too
		return fmt.Errorf("bay: %w", err)
	}
}

// URL is bay's base URL ("http://127.0.0.1:PORT"), valid after Start.
func (b *Bay) URL() string { return "http://" + b.Main.ListenAddr() }

// Stop stops bay gracefully and waits for it; it does nothing if bay is not running.
func (b *Bay) Stop() {
	if b.stop == nil {
		return
	}
	b.stop()
	<-b.done
	b.stop = nil
}

// Close stops bay, closes the log file and removes the data directory; call it once.
func (b *Bay) Close() {
	b.Stop()
	b.logs.Close()
	os.RemoveAll(b.Dir)
}
