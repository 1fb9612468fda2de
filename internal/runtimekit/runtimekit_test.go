package runtimekit

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
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
