package bay

import (
	"cmp"
	"fmt"
)

// NetMode is what an audited execution may reach, ordered none < allowlist < open.
type NetMode string

const (
	NetNone      NetMode = "none"
	NetAllowlist NetMode = "allowlist"
	NetOpen      NetMode = "open"
)

// netRank orders the modes; an unknown mode has none.
var netRank = map[NetMode]int{NetNone: 1, NetAllowlist: 2, NetOpen: 3}

// ExecPolicy is the effective policy of one audited execution: its network, its time, the
// resources of its container and the caps on what goes in and comes out. It is stored with the
// execution's record as it was applied.
type ExecPolicy struct {
	NetMode                NetMode `json:"net_mode"`
	TimeoutMS              int64   `json:"timeout_ms"`
	MaxArtifactsBytesTotal int64   `json:"max_artifacts_bytes_total"`
	MemoryMB               int64   `json:"memory_mb"`
	CPUCores               float64 `json:"cpu_cores"`
	Pids                   int64   `json:"pids"`
	// IOCaps' fields are the policy's own in JSON.
	IOCaps
}

// DefaultExecPolicy is the system's policy before any setting: no network, 60 s, 1 MB of
// stdout and of stderr, 50 MB of artifacts, 1024 MB of memory, one CPU, 256 processes; a
// single input or output of at most 20 MiB, 50 MiB of them in all.
func DefaultExecPolicy() ExecPolicy {
	return ExecPolicy{
		NetMode: NetNone, TimeoutMS: 60_000, MaxArtifactsBytesTotal: 50_000_000, MemoryMB: 1024, CPUCores: 1, Pids: 256,
		IOCaps: IOCaps{MaxStdoutBytes: 1_000_000, MaxStderrBytes: 1_000_000,
			MaxInputBytes: 20 << 20, MaxInputsBytesTotal: 50 << 20, MaxOutputBytes: 20 << 20, MaxOutputsBytesTotal: 50 << 20},
	}
}

// PolicyOverrides is one layer of the merge: nil fields leave the field as the layers below
// set it.
type PolicyOverrides struct {
	NetMode                *NetMode `json:"net_mode,omitempty"`
	TimeoutMS              *int64   `json:"timeout_ms,omitempty"`
	MaxStdoutBytes         *int64   `json:"max_stdout_bytes,omitempty"`
	MaxStderrBytes         *int64   `json:"max_stderr_bytes,omitempty"`
	MaxArtifactsBytesTotal *int64   `json:"max_artifacts_bytes_total,omitempty"`
	MemoryMB               *int64   `json:"memory_mb,omitempty"`
	CPUCores               *float64 `json:"cpu_cores,omitempty"`
	Pids                   *int64   `json:"pids,omitempty"`
	MaxInputBytes          *int64   `json:"max_input_bytes,omitempty"`
	MaxInputsBytesTotal    *int64   `json:"max_inputs_bytes_total,omitempty"`
	MaxOutputBytes         *int64   `json:"max_output_bytes,omitempty"`
	MaxOutputsBytesTotal   *int64   `json:"max_outputs_bytes_total,omitempty"`
}

// CodePolicyViolation: a skill manifest or a request asked for more than the policy allows.
const CodePolicyViolation = "policy_violation"

// MergeExecPolicy is the one merge of an execution's policy: system defaults, then the
// settings (the operator's ceilings: they may loosen or tighten the defaults), then the skill's
// manifest, then the request's overrides; a manifest or a request may only tighten. Asking for
// more fails with policy_violation naming the field, what was asked and what is allowed; a
// value out of its domain (not positive, an unknown network mode) fails with validation_error.
// It is pure.
func MergeExecPolicy(system ExecPolicy, settings, manifest, request PolicyOverrides) (ExecPolicy, error) {
	p := system
	for _, l := range []struct {
		name    string
		o       PolicyOverrides
		tighten bool
	}{{"settings", settings, false}, {"manifest", manifest, true}, {"request", request, true}} {
		if err := p.apply(l.name, l.o, l.tighten); err != nil {
			return ExecPolicy{}, err
		}
	}
	return p, nil
}

// apply lays o over p, field by field.
func (p *ExecPolicy) apply(layer string, o PolicyOverrides, tighten bool) error {
	if o.NetMode != nil {
		asked := *o.NetMode
		if netRank[asked] == 0 {
			return Errorf(CodeValidation, "%s: net_mode %q is not one of none, allowlist, open", layer, asked)
		}
		if tighten && netRank[asked] > netRank[p.NetMode] {
			return violation(layer, "net_mode", asked, p.NetMode)
		}
		p.NetMode = asked
	}
	ints := []struct {
		name string
		dst  *int64
		o    *int64
	}{
		{"timeout_ms", &p.TimeoutMS, o.TimeoutMS},
		{"max_stdout_bytes", &p.MaxStdoutBytes, o.MaxStdoutBytes},
		{"max_stderr_bytes", &p.MaxStderrBytes, o.MaxStderrBytes},
		{"max_artifacts_bytes_total", &p.MaxArtifactsBytesTotal, o.MaxArtifactsBytesTotal},
		{"memory_mb", &p.MemoryMB, o.MemoryMB},
		{"pids", &p.Pids, o.Pids},
		{"max_input_bytes", &p.MaxInputBytes, o.MaxInputBytes},
		{"max_inputs_bytes_total", &p.MaxInputsBytesTotal, o.MaxInputsBytesTotal},
		{"max_output_bytes", &p.MaxOutputBytes, o.MaxOutputBytes},
		{"max_outputs_bytes_total", &p.MaxOutputsBytesTotal, o.MaxOutputsBytesTotal},
	}
	for _, f := range ints {
		if err := layOver(layer, f.name, f.dst, f.o, tighten); err != nil {
			return err
		}
	}
	return layOver(layer, "cpu_cores", &p.CPUCores, o.CPUCores, tighten)
}

// layOver sets *dst to *asked: asked must be positive, and at most *dst when tightening.
func layOver[T int64 | float64](layer, field string, dst, asked *T, tighten bool) error {
	switch {
	case asked == nil:
		return nil
	case *asked <= 0:
		return Errorf(CodeValidation, "%s: %s must be positive, got %v", layer, field, *asked).
			WithDetails(map[string]any{"field": field, "asked": *asked})
	case tighten && cmp.Compare(*asked, *dst) > 0:
		return violation(layer, field, *asked, *dst)
	}
	*dst = *asked
	return nil
}

func violation(layer, field string, asked, allowed any) *Error {
	return &Error{
		Code:    CodePolicyViolation,
		Message: fmt.Sprintf("%s asks %s = %v, more than the %v allowed", layer, field, asked, allowed),
		Details: map[string]any{"field": field, "asked": asked, "allowed": allowed, "layer": layer},
	}
}
