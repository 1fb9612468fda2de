package sdk

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// handlerTransport runs an http.Handler in-process, so that retries can be timed inside a
// synctest bubble (fake clock, no real sleeping).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func scripted(t *testing.T, answers []string, seen *[]time.Time) *Client {
	t.Helper()
	i := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = append(*seen, time.Now())
		a := answers[min(i, len(answers)-1)]
		i++
		status := 200
		body := `{"status":"ok","version":"x"}`
		switch a {
		case "502":
			status, body = 502, `{"error":{"code":"ship_error","message":"x","request_id":"r"}}`
		case "snr":
			status, body = 503, `{"error":{"code":"session_not_ready","message":"Session is starting","request_id":"r","details":{"retry_after_ms":1000}}}`
		case "429":
			w.Header().Set("Retry-After", "2")
			status, body = 429, `{"error":{"code":"quota_exceeded","message":"slow down","request_id":"r"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
	c, err := New("http://bay.test", "", WithHTTPClient(&http.Client{Transport: handlerTransport{h}}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func TestBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []time.Time
		c := scripted(t, []string{"502", "502", "502", "ok"}, &seen)
		if _, err := c.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
		g := gaps(seen)
		if len(g) != 3 {
			t.Fatalf("attempts %d", len(seen))
		}
		for i, base := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
			if g[i] < base/2 || g[i] > base {
				t.Errorf("gap %d = %v, want in [%v, %v]", i, g[i], base/2, base)
			}
		}
	})
}

func TestBackoffCap(t *testing.T) {
	for n := 0; n < 10; n++ {
		for range 50 {
			d := DefaultBackoff(n)
			if d > 1500*time.Millisecond || d < 100*time.Millisecond {
				t.Fatalf("DefaultBackoff(%d) = %v", n, d)
			}
		}
	}
	if d := DefaultBackoff(5); d < 750*time.Millisecond {
		t.Fatalf("cap: %v", d)
	}
}

func TestSessionNotReadyHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []time.Time
		c := scripted(t, []string{"snr", "snr", "ok"}, &seen)
		if _, err := c.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, g := range gaps(seen) {
			if g != time.Second {
				t.Fatalf("gap %v, want exactly retry_after_ms=1000", g)
			}
		}
	})
}

func TestRetryAfterHeaderOn429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []time.Time
		c := scripted(t, []string{"429", "ok"}, &seen)
		if _, err := c.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
		if g := gaps(seen); len(g) != 1 || g[0] != 2*time.Second {
			t.Fatalf("gaps %v", g)
		}
	})
}

func TestExecTimeout(t *testing.T) {
	c, _ := New("http://x", "", WithTimeout(time.Second))
	if d := c.execTimeout(2*time.Second, 30); d != 17*time.Second {
		t.Fatalf("exec timeout %v", d)
	}
	if d := c.execTimeout(0, 30); d != 45*time.Second {
		t.Fatalf("default exec timeout %v", d)
	}
	if d := c.execTimeout(0, DefaultBrowserBatchTimeout); d != 75*time.Second {
		t.Fatalf("default browser batch timeout %v", d)
	}
	if d := c.execTimeout(MaxBrowserBatchTimeout*time.Second, DefaultBrowserBatchTimeout); d != 615*time.Second {
		t.Fatalf("longest browser batch timeout %v", d)
	}
	c, _ = New("http://x", "", WithTimeout(10*time.Minute))
	if d := c.execTimeout(300*time.Second, 30); d != 10*time.Minute {
		t.Fatalf("%v", d)
	}
}

func TestCancelDuringBackoffStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []time.Time
		c := scripted(t, []string{"502"}, &seen)
		c.backoff = func(int) time.Duration { return time.Hour }
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		_, err := c.Health(ctx)
		if e, ok := AsError(err); !ok || e.Code != "ship_error" {
			t.Fatalf("err %v, want the last API error", err)
		}
		if len(seen) != 1 || time.Since(start) != time.Minute {
			t.Fatalf("attempts %d after %v", len(seen), time.Since(start))
		}
	})
}

// A 4xx is the caller's mistake (or a decision, like 409): never retried, whatever the method;
// 502/503/504 and network errors are retried only for requests safe to repeat (GET here), and
// never for an exec without an Idempotency-Key.
func TestClientErrorsAreNeverRetried(t *testing.T) {
	answer := func(status int, code string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"code":"`+code+`","message":"x","request_id":"r"}}`)
		}
	}
	cases := []struct {
		status int
		code   string
		want   int // attempts of a GET
	}{
		{400, "is_a_directory", 1}, {400, "invalid_path", 1}, {400, "validation_error", 1}, {401, "unauthorized", 1},
		{404, "file_not_found", 1}, {409, "conflict", 1}, {413, "payload_too_large", 1}, {422, "validation_error", 1},
		{431, "headers_too_large", 1}, {499, "validation_error", 1},
		{502, "ship_error", DefaultMaxRetries + 1}, {504, "timeout", DefaultMaxRetries + 1},
	}
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			var attempts int
			h := answer(tc.status, tc.code)
			c, err := New("http://bay.test", "", WithHTTPClient(&http.Client{Transport: handlerTransport{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts++
				h(w, r)
			})}}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadFile(context.Background(), "sandbox-1", "."); err == nil {
				t.Fatal("no error")
			}
			if attempts != tc.want {
				t.Errorf("GET answered %d %s: %d attempts, want %d", tc.status, tc.code, attempts, tc.want)
			}
			attempts = 0
			if _, err := c.ExecShell(context.Background(), "sandbox-1", ShellRequest{Command: "true"}); err == nil {
				t.Fatal("no error")
			}
			if attempts != 1 {
				t.Errorf("exec answered %d %s: %d attempts, want 1", tc.status, tc.code, attempts)
			}
		})
	}
}

// Durations go on the wire in whole seconds, rounded up: a 1.5 s timeout is 2 s, never the
// 1 s that would cut the caller's budget, and 0 stays "bay's default".
func TestWholeSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 0, time.Nanosecond: 1, time.Second: 1, 1500 * time.Millisecond: 2,
		time.Hour: 3600, -time.Second: -1, -1500 * time.Millisecond: -2} {
		if got := wholeSeconds(d); got != want {
			t.Errorf("wholeSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	if optSeconds(0) != nil {
		t.Error("a zero duration is sent")
	}
}
