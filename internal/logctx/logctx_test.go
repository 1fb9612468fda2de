package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/logctx"
)

func TestHandlerAddsTheRequestIdentity(t *testing.T) {
	var buf bytes.Buffer
	log := logctx.Wrap(slog.New(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	ctx := logctx.WithOwner(logctx.WithRequestID(context.Background(), "req-1"), "alice")

	log.InfoContext(ctx, "with context")
	log.Info("without context")
	log.InfoContext(ctx, "explicit", "request_id", "req-1")
	log.With("owner", "bob").InfoContext(ctx, "owner bound")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var got []map[string]any
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if got[0]["request_id"] != "req-1" || got[0]["owner"] != "alice" {
		t.Errorf("with context: %v", got[0])
	}
	if _, ok := got[1]["request_id"]; ok {
		t.Errorf("without context: %v", got[1])
	}
	if strings.Count(lines[2], `"request_id"`) != 1 {
		t.Errorf("an explicit request_id is not repeated: %s", lines[2])
	}
	if strings.Count(lines[3], `"owner"`) != 1 || got[3]["owner"] != "bob" {
		t.Errorf("a bound owner is not repeated: %s", lines[3])
	}
	if logctx.Wrap(log) != log {
		t.Error("Wrap of a wrapped logger wraps again")
	}
}
