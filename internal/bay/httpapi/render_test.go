package httpapi_test

import (
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
)

// Times in an error's details (a sandbox's expires_at) leave in the wire's time format, like
// every other time bay writes, and the service's error keeps its own values.
func TestErrorDetailTimesUseTheWireFormat(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	in := map[string]any{"sandbox_id": "sbx_1", "expires_at": at}
	out := httpapi.WireDetails(in)
	if out["expires_at"] != bayapi.FormatTime(at) || bayapi.FormatTime(at) != "2026-03-01T10:00:00.123456" || out["sandbox_id"] != "sbx_1" {
		t.Fatalf("details %v", out)
	}
	if in["expires_at"] != at {
		t.Fatalf("the error's own details changed: %v", in)
	}
	plain := map[string]any{"retry_after_ms": 1000}
	if got := httpapi.WireDetails(plain); got["retry_after_ms"] != 1000 || len(got) != 1 {
		t.Fatalf("details without times: %v", got)
	}
}
