package config

import "github.com/shipyard-dev/shipyard/internal/bay"

// LimitsConfig bounds the ordinary sandbox calls: python and shell exec, file read, write,
// upload and download (ours). The keys are those of the user's sandbox settings; the
// timeouts' defaults are the wire contract's.
type LimitsConfig struct {
	// TimeoutSecDefault is the timeout of an exec that gives none (30 s); TimeoutSecMax the
	// most one may ask (300 s; above it: 422 naming it).
	TimeoutSecDefault int `yaml:"timeout_sec_default"`
	TimeoutSecMax     int `yaml:"timeout_sec_max"`
	// StdoutMaxBytes and StderrMaxBytes cut an exec's output and error text (the answer says
	// it was truncated); 200 KiB each.
	StdoutMaxBytes ByteSize `yaml:"stdout_max_bytes"`
	StderrMaxBytes ByteSize `yaml:"stderr_max_bytes"`
	// InputMaxBytes bounds one file written or uploaded (20 MiB); TotalInputMaxBytes the
	// whole request body that carries it, or code or a command (50 MiB). Larger: 413,
	// nothing written.
	InputMaxBytes      ByteSize `yaml:"input_max_bytes"`
	TotalInputMaxBytes ByteSize `yaml:"total_input_max_bytes"`
	// OutputMaxBytes bounds one file read or downloaded (20 MiB; larger: 413);
	// TotalOutputMaxBytes a python exec's whole answer, text, error and images (50 MiB;
	// images past it are dropped and the answer says so).
	OutputMaxBytes      ByteSize `yaml:"output_max_bytes"`
	TotalOutputMaxBytes ByteSize `yaml:"total_output_max_bytes"`
}

// maxTimeoutSec bounds timeout_sec_max: a synchronous call holds its HTTP request for as
// long; longer work is a job.
const maxTimeoutSec = 86400

func defaultLimits() LimitsConfig {
	d := bay.DefaultCallLimits()
	return LimitsConfig{
		TimeoutSecDefault: d.DefaultTimeout, TimeoutSecMax: d.MaxTimeout,
		StdoutMaxBytes: ByteSize(d.MaxStdoutBytes), StderrMaxBytes: ByteSize(d.MaxStderrBytes),
		InputMaxBytes: ByteSize(d.MaxInputBytes), TotalInputMaxBytes: ByteSize(d.MaxInputsBytesTotal),
		OutputMaxBytes: ByteSize(d.MaxOutputBytes), TotalOutputMaxBytes: ByteSize(d.MaxOutputsBytesTotal),
	}
}

func (l *LimitsConfig) validate(add func(key, format string, args ...any)) {
	if l.TimeoutSecMax < 1 || l.TimeoutSecMax > maxTimeoutSec {
		add("limits.timeout_sec_max", "must be 1..%d seconds, got %d", maxTimeoutSec, l.TimeoutSecMax)
	}
	if l.TimeoutSecDefault < 1 || l.TimeoutSecDefault > max(l.TimeoutSecMax, 1) {
		add("limits.timeout_sec_default", "must be 1..timeout_sec_max (%d) seconds, got %d", l.TimeoutSecMax, l.TimeoutSecDefault)
	}
	for _, f := range []struct {
		key string
		v   ByteSize
	}{
		{"stdout_max_bytes", l.StdoutMaxBytes}, {"stderr_max_bytes", l.StderrMaxBytes},
		{"input_max_bytes", l.InputMaxBytes}, {"total_input_max_bytes", l.TotalInputMaxBytes},
		{"output_max_bytes", l.OutputMaxBytes}, {"total_output_max_bytes", l.TotalOutputMaxBytes},
	} {
		if f.v <= 0 {
			add("limits."+f.key, "must be > 0, got %d", f.v)
		}
	}
	if l.TotalInputMaxBytes > 0 && l.TotalInputMaxBytes < l.InputMaxBytes {
		add("limits.total_input_max_bytes", "must be at least input_max_bytes (%d), got %d", l.InputMaxBytes, l.TotalInputMaxBytes)
	}
}

// CallLimits are the limits as the services take them.
func (l LimitsConfig) CallLimits() bay.CallLimits {
	return bay.CallLimits{DefaultTimeout: l.TimeoutSecDefault, MaxTimeout: l.TimeoutSecMax, IOCaps: bay.IOCaps{
		MaxStdoutBytes: int64(l.StdoutMaxBytes), MaxStderrBytes: int64(l.StderrMaxBytes),
		MaxInputBytes: int64(l.InputMaxBytes), MaxInputsBytesTotal: int64(l.TotalInputMaxBytes),
		MaxOutputBytes: int64(l.OutputMaxBytes), MaxOutputsBytesTotal: int64(l.TotalOutputMaxBytes),
	}}
}
