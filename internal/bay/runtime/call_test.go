package runtime

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// A runtime refusing the session's token is another sandbox's: the error says so, and stays
// the translated error the status function made.
func TestDoJSONForeignRuntime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	statusErr := func(resp *http.Response) error {
		return bay.Errorf(bay.CodeShipError, "status %d", resp.StatusCode)
	}
	var out struct{}
	err := DoJSON(context.Background(), srv.Client(), "ship", srv.URL, http.MethodGet, "/health", nil, &out, time.Second, statusErr)
	var be *bay.Error
	if !errors.Is(err, ErrForeign) || !errors.As(err, &be) || be.Code != bay.CodeShipError {
		t.Fatalf("401: %v, want ErrForeign wrapping the status error", err)
	}
	err = DoJSON(context.Background(), srv.Client(), "ship", srv.URL, http.MethodGet, "/other", nil, &out, time.Second, statusErr)
	if err == nil || errors.Is(err, ErrForeign) {
		t.Fatalf("503: %v, want a plain status error", err)
	}
}
