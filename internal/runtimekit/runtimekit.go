// Package runtimekit holds the small pieces the two sandbox runtime daemons
// (ship and gull) share: environment editing for the processes they start,
// build facts read from the environment, reading the runtime token of a
// request, and waiting for the sandbox's network policy. Standard library only.
package runtimekit

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// WithoutEnv returns env without the variables named keys.
func WithoutEnv(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); !slices.Contains(keys, k) {
			out = append(out, e)
		}
	}
	return out
}

// WithEnv returns env with the given KEY=VALUE pairs set (replacing).
func WithEnv(env []string, kv ...string) []string {
	keys := make([]string, len(kv))
	for i, n := range kv {
		keys[i], _, _ = strings.Cut(n, "=")
	}
	return append(WithoutEnv(env, keys...), kv...)
}

// EnvOr is the value of variable k, or def when it is unset or empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// EnvPtr is the value of variable k, or nil when it is unset or empty.
func EnvPtr(k string) *string {
	if v := os.Getenv(k); v != "" {
		return &v
	}
	return nil
}

// RequestToken is the runtime token a request carries: a Bearer token, or
// the password of Basic credentials (what Go's client sends for a URL with
// user info); "" without either.
func RequestToken(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	if _, p, ok := r.BasicAuth(); ok {
		return p
	}
	return ""
}

// RequireToken wraps next so that every request but those for the path open
// (the readiness probe) carries token (see RequestToken), and a request for open
// carries either no token or the right one; the others get the
// WWW-Authenticate challenge and deny's answer. An empty token requires
// nothing (a runtime started by hand).
func RequireToken(next http.Handler, token, open, challenge string, deny http.HandlerFunc) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The open path answers a caller without a token (a health check) but refuses a wrong
		// one: bay's readiness probe sends the session's token, so a runtime of another sandbox
		// that was given a dead one's address cannot pass for it.
		got := RequestToken(r)
		if (r.URL.Path == open && got == "") || subtle.ConstantTimeCompare([]byte(got), want) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", challenge)
		deny(w, r)
	})
}

// EnvNetworkBarrier names a TCP address (host:port) the sandbox's network policy forbids but
// nothing else does. A runtime given one serves only once a connection to it fails: that is
// when the node's enforcer has programmed the policy, which happens a moment after the
// sandbox's Pod has its address. Before that the Pod's traffic is not filtered at all.
const EnvNetworkBarrier = "SHIPYARD_NETWORK_BARRIER"

// AwaitNetworkBarrier returns once a TCP connection to addr fails (refused or timed out),
// retrying while connections succeed, every 10 ms for the first seconds (an enforcer
// programs a policy within tens of milliseconds: each retry's interval is start latency),
// then every 100 ms; it returns an error when they still succeed after within, or when ctx
// ends. It reports how long it waited.
func AwaitNetworkBarrier(ctx context.Context, addr string, within time.Duration) (time.Duration, error) {
	t0 := time.Now()
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return time.Since(t0), cerr
			}
			return time.Since(t0), nil
		}
		_ = c.Close()
		if time.Since(t0) >= within {
			return time.Since(t0), fmt.Errorf("the sandbox's network policy is not in force after %s: a connection it forbids (to %s) still succeeds", within, addr)
		}
		every := 10 * time.Millisecond
		if time.Since(t0) > 2*time.Second {
			every = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return time.Since(t0), ctx.Err()
		case <-time.After(every):
		}
	}
}

// NetworkBarrierTimeout bounds a runtime's wait behind EnvNetworkBarrier; past it the runtime
// exits instead of serving (the sandbox's start fails, closed).
const NetworkBarrierTimeout = time.Minute

// AwaitEnvNetworkBarrier waits behind the barrier EnvNetworkBarrier names, when it names one,
// and logs how long it waited.
func AwaitEnvNetworkBarrier(ctx context.Context, log *slog.Logger) error {
	addr := os.Getenv(EnvNetworkBarrier)
	if addr == "" {
		return nil
	}
	waited, err := AwaitNetworkBarrier(ctx, addr, NetworkBarrierTimeout)
	if err != nil {
		return err
	}
	log.Info("network policy in force", "barrier", addr, "waited_ms", waited.Milliseconds())
	return nil
}
