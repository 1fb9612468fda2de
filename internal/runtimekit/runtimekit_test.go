package runtimekit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	env := []string{"A=1", "TOKEN=x", "B=2=3", "HOME=/root"}
	if got := WithoutEnv(env, "TOKEN", "HOME"); !slices.Equal(got, []string{"A=1", "B=2=3"}) {
		t.Errorf("WithoutEnv = %q", got)
	}
	if got := WithEnv(env, "HOME=/w", "C=4"); !slices.Equal(got, []string{"A=1", "TOKEN=x", "B=2=3", "HOME=/w", "C=4"}) {
		t.Errorf("WithEnv = %q", got)
	}
	t.Setenv("RTK_SET", "v")
	t.Setenv("RTK_EMPTY", "")
	if EnvOr("RTK_SET", "d") != "v" || EnvOr("RTK_EMPTY", "d") != "d" || EnvPtr("RTK_EMPTY") != nil || *EnvPtr("RTK_SET") != "v" {
		t.Error("EnvOr/EnvPtr")
	}
}

func TestRequestToken(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	if RequestToken(r) != "" {
		t.Error("token without credentials")
	}
	r.Header.Set("Authorization", "Bearer abc")
	if RequestToken(r) != "abc" {
		t.Error("bearer")
	}
	r.SetBasicAuth("user", "pw")
	if RequestToken(r) != "pw" {
		t.Error("basic")
	}
}

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	deny := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }
	h := RequireToken(ok, "tok", "/health", `Basic realm="x"`, deny)
	for _, c := range []struct {
		path, auth string
		code       int
	}{
		{"/health", "", 204}, {"/health", "Bearer tok", 204}, {"/health", "Bearer other-sandbox", 401}, {"/health", "Basic dTpvdGhlcg==", 401}, {"/exec", "", 401}, {"/exec", "Bearer nope", 401}, {"/exec", "Bearer tok", 204}, {"/health/x", "", 401},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Errorf("%s %q: %d, want %d", c.path, c.auth, w.Code, c.code)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") != `Basic realm="x"` {
			t.Errorf("no challenge")
		}
	}
	if RequireToken(ok, "", "/health", "", deny) == nil {
		t.Error("nil handler without a token")
	}
}

// TestAwaitNetworkBarrier: the wait ends once a connection to the barrier fails (here, its
// listener closed after 300 ms, as an enforcer starts refusing), and is an error while
// connections still succeed at the bound.
func TestAwaitNetworkBarrier(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go acceptAll(l)
	time.AfterFunc(300*time.Millisecond, func() { l.Close() })
	waited, err := AwaitNetworkBarrier(t.Context(), l.Addr().String(), time.Minute)
	if err != nil || waited < 300*time.Millisecond {
		t.Fatalf("barrier closed after 300 ms: waited %v, %v", waited, err)
	}

	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	go acceptAll(open)
	if _, err := AwaitNetworkBarrier(t.Context(), open.Addr().String(), 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not in force") {
		t.Fatalf("a barrier that stays open: %v, want an error", err)
	}
}

// acceptAll accepts and closes connections until l is closed.
func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
