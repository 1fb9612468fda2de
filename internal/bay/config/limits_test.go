package config

import (
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// TestLimitsDefaults: the user's sandbox settings' caps and the contract's timeouts, as the
// services take them.
func TestLimitsDefaults(t *testing.T) {
	got := mustLoad(t, "").Limits.CallLimits()
	want := bay.CallLimits{DefaultTimeout: 30, MaxTimeout: 300, IOCaps: bay.IOCaps{
		MaxStdoutBytes: 204800, MaxStderrBytes: 204800, MaxInputBytes: 20971520, MaxInputsBytesTotal: 52428800,
		MaxOutputBytes: 20971520, MaxOutputsBytesTotal: 52428800,
	}}
	if got != want {
		t.Fatalf("limits %+v, want %+v", got, want)
	}
}

// TestLimitsBounds: every limit at and past its bounds, sizes with units and past int64,
// durations past their ceiling, misspelled keys, and the environment.
func TestLimitsBounds(t *testing.T) {
	ok := []struct {
		name, yaml string
		check      func(LimitsConfig) bool
	}{
		{"ceiling 1", "limits: {timeout_sec_max: 1, timeout_sec_default: 1}", func(l LimitsConfig) bool { return l.TimeoutSecMax == 1 }},
		{"ceiling a day", "limits: {timeout_sec_max: 86400, timeout_sec_default: 86400}", func(l LimitsConfig) bool { return l.TimeoutSecDefault == 86400 }},
		{"default at the ceiling", "limits: {timeout_sec_max: 120, timeout_sec_default: 120}", func(l LimitsConfig) bool { return l.TimeoutSecDefault == 120 }},
		{"units", "limits: {stdout_max_bytes: 1k, input_max_bytes: 2m, total_input_max_bytes: 2m, output_max_bytes: 1g}", func(l LimitsConfig) bool {
			return l.StdoutMaxBytes == 1024 && l.InputMaxBytes == 2<<20 && l.TotalInputMaxBytes == 2<<20 && l.OutputMaxBytes == 1<<30
		}},
		{"one byte", "limits: {stdout_max_bytes: 1, stderr_max_bytes: 1, input_max_bytes: 1, total_input_max_bytes: 1, output_max_bytes: 1, total_output_max_bytes: 1}",
			func(l LimitsConfig) bool {
				return l.CallLimits().IOCaps == bay.IOCaps{MaxStdoutBytes: 1, MaxStderrBytes: 1, MaxInputBytes: 1, MaxInputsBytesTotal: 1, MaxOutputBytes: 1, MaxOutputsBytesTotal: 1}
			}},
	}
	for _, c := range ok {
		cfg, err := load(t, c.yaml)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !c.check(cfg.Limits) {
			t.Errorf("%s: %+v", c.name, cfg.Limits)
		}
	}
	bad := []struct{ name, yaml, want string }{
		{"ceiling 0", "limits: {timeout_sec_max: 0}", "limits.timeout_sec_max: must be 1..86400 seconds, got 0"},
		{"ceiling negative", "limits: {timeout_sec_max: -5}", "limits.timeout_sec_max: must be 1..86400 seconds, got -5"},
		{"ceiling past a day", "limits: {timeout_sec_max: 86401}", "limits.timeout_sec_max: must be 1..86400 seconds, got 86401"},
		{"ceiling past int64", "limits: {timeout_sec_max: 99999999999999999999}", "limits.timeout_sec_max"},
		{"default 0", "limits: {timeout_sec_default: 0}", "limits.timeout_sec_default: must be 1..timeout_sec_max (300) seconds, got 0"},
		{"default over the ceiling", "limits: {timeout_sec_max: 60, timeout_sec_default: 61}", "limits.timeout_sec_default: must be 1..timeout_sec_max (60) seconds, got 61"},
		{"default over the default ceiling", "limits: {timeout_sec_default: 301}", "got 301"},
		{"stdout 0", "limits: {stdout_max_bytes: 0}", "limits.stdout_max_bytes: must be > 0, got 0"},
		{"stderr 0", "limits: {stderr_max_bytes: 0}", "limits.stderr_max_bytes: must be > 0"},
		{"input 0", "limits: {input_max_bytes: 0}", "limits.input_max_bytes: must be > 0"},
		{"output 0", "limits: {output_max_bytes: 0}", "limits.output_max_bytes: must be > 0"},
		{"total output 0", "limits: {total_output_max_bytes: 0}", "limits.total_output_max_bytes: must be > 0"},
		{"negative size", "limits: {output_max_bytes: -1}", "invalid size"},
		{"size past int64", "limits: {input_max_bytes: 9000000t}", "too large"},
		{"size past int64 in bytes", "limits: {input_max_bytes: 99999999999999999999}", "too large"},
		{"not a size", "limits: {output_max_bytes: 8000p}", "invalid size"},
		{"total below one", "limits: {input_max_bytes: 60m}", "limits.total_input_max_bytes: must be at least input_max_bytes (62914560), got 52428800"},
		{"misspelled", "limits: {stdout_max_byte: 10}", `unknown key "limits.stdout_max_byte" (did you mean "limits.stdout_max_bytes"?)`},
		{"misspelled section", "limit: {stdout_max_bytes: 10}", `(did you mean "limits"?)`},
	}
	for _, c := range bad {
		_, err := load(t, c.yaml)
		if err == nil {
			t.Errorf("%s: loaded, want an error containing %q", c.name, c.want)
			continue
		}
		wantErr(t, err, c.want)
	}
	cfg := mustLoad(t, "", "BAY_LIMITS__TIMEOUT_SEC_MAX=600", "BAY_LIMITS__OUTPUT_MAX_BYTES=1g")
	if cfg.Limits.TimeoutSecMax != 600 || cfg.Limits.OutputMaxBytes != 1<<30 {
		t.Errorf("from the environment: %+v", cfg.Limits)
	}
}
