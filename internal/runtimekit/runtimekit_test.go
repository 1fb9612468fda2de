package runtimekit

import (
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
