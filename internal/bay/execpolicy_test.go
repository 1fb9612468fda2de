package bay

import (
	"errors"
	"testing"
)

func p64(v int64) *int64      { return &v }
func pf(v float64) *float64   { return &v }
func pnet(v NetMode) *NetMode { return &v }

// policyFields lists every field of the policy: how to set it in a layer, how to read it back,
// the default, a value below and a value above it.
var policyFields = []struct {
	name       string
	set        func(o *PolicyOverrides, v float64)
	get        func(p ExecPolicy) float64
	def        float64
	less, more float64
}{
	{"timeout_ms", func(o *PolicyOverrides, v float64) { o.TimeoutMS = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.TimeoutMS) }, 60_000, 1000, 120_000},
	{"max_stdout_bytes", func(o *PolicyOverrides, v float64) { o.MaxStdoutBytes = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxStdoutBytes) }, 1_000_000, 10, 2_000_000},
	{"max_stderr_bytes", func(o *PolicyOverrides, v float64) { o.MaxStderrBytes = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxStderrBytes) }, 1_000_000, 10, 2_000_000},
	{"max_artifacts_bytes_total", func(o *PolicyOverrides, v float64) { o.MaxArtifactsBytesTotal = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxArtifactsBytesTotal) }, 50_000_000, 1000, 60_000_000},
	{"memory_mb", func(o *PolicyOverrides, v float64) { o.MemoryMB = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MemoryMB) }, 1024, 256, 2048},
	{"cpu_cores", func(o *PolicyOverrides, v float64) { o.CPUCores = pf(v) }, func(p ExecPolicy) float64 { return p.CPUCores }, 1, 0.5, 1.5},
	{"pids", func(o *PolicyOverrides, v float64) { o.Pids = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.Pids) }, 256, 64, 512},
	{"max_input_bytes", func(o *PolicyOverrides, v float64) { o.MaxInputBytes = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxInputBytes) }, 20 << 20, 1 << 20, 30 << 20},
	{"max_inputs_bytes_total", func(o *PolicyOverrides, v float64) { o.MaxInputsBytesTotal = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxInputsBytesTotal) }, 50 << 20, 1 << 20, 60 << 20},
	{"max_output_bytes", func(o *PolicyOverrides, v float64) { o.MaxOutputBytes = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxOutputBytes) }, 20 << 20, 1 << 20, 30 << 20},
	{"max_outputs_bytes_total", func(o *PolicyOverrides, v float64) { o.MaxOutputsBytesTotal = p64(int64(v)) }, func(p ExecPolicy) float64 { return float64(p.MaxOutputsBytesTotal) }, 50 << 20, 1 << 20, 60 << 20},
}

// TestMergeExecPolicyEveryField: for every numeric field, settings may raise or lower the
// default; a manifest or a request may lower it but asking more is a policy_violation naming
// the field, the value asked and the value allowed; zero and negative values are refused.
func TestMergeExecPolicyEveryField(t *testing.T) {
	for _, f := range policyFields {
		t.Run(f.name, func(t *testing.T) {
			if got := f.get(DefaultExecPolicy()); got != f.def {
				t.Fatalf("default = %v, want %v", got, f.def)
			}
			layer := func(v float64) PolicyOverrides { var o PolicyOverrides; f.set(&o, v); return o }
			none := PolicyOverrides{}
			ok := []struct {
				name                        string
				settings, manifest, request PolicyOverrides
				want                        float64
			}{
				{"defaults", none, none, none, f.def},
				{"settings raise", layer(f.more), none, none, f.more},
				{"settings lower", layer(f.less), none, none, f.less},
				{"manifest tightens", none, layer(f.less), none, f.less},
				{"request tightens", none, none, layer(f.less), f.less},
				{"request equal", none, none, layer(f.def), f.def},
				{"request within raised settings", layer(f.more), none, layer(f.more), f.more},
			}
			for _, c := range ok {
				p, err := MergeExecPolicy(DefaultExecPolicy(), c.settings, c.manifest, c.request)
				if err != nil || f.get(p) != c.want {
					t.Errorf("%s: got %v, %v; want %v", c.name, f.get(p), err, c.want)
				}
			}
			bad := []struct {
				name                        string
				settings, manifest, request PolicyOverrides
				layer                       string
				allowed                     float64
			}{
				{"request escalates", none, none, layer(f.more), "request", f.def},
				{"manifest escalates", none, layer(f.more), none, "manifest", f.def},
				{"request above the manifest", none, layer(f.less), layer(f.def), "request", f.less},
				{"request above lowered settings", layer(f.less), none, layer(f.def), "request", f.less},
			}
			for _, c := range bad {
				_, err := MergeExecPolicy(DefaultExecPolicy(), c.settings, c.manifest, c.request)
				var e *Error
				if !errors.As(err, &e) || e.Code != CodePolicyViolation {
					t.Errorf("%s: got %v, want policy_violation", c.name, err)
					continue
				}
				if e.Details["field"] != f.name || e.Details["layer"] != c.layer || toF(e.Details["allowed"]) != c.allowed {
					t.Errorf("%s: details %v, want field %s layer %s allowed %v", c.name, e.Details, f.name, c.layer, c.allowed)
				}
			}
			for _, v := range []float64{0, -1} {
				for _, where := range []string{"settings", "request"} {
					s, r := none, none
					if where == "settings" {
						s = layer(v)
					} else {
						r = layer(v)
					}
					if _, err := MergeExecPolicy(DefaultExecPolicy(), s, none, r); ErrorCode(err) != CodeValidation {
						t.Errorf("%s %v: got %v, want validation_error", where, v, err)
					}
				}
			}
		})
	}
}

func toF(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return -1
}

// TestMergeExecPolicyNetMode: none < allowlist < open; a request may only go down the order;
// an unknown mode is a validation error wherever it appears.
func TestMergeExecPolicyNetMode(t *testing.T) {
	none := PolicyOverrides{}
	net := func(m NetMode) PolicyOverrides { return PolicyOverrides{NetMode: pnet(m)} }
	cases := []struct {
		name                        string
		settings, manifest, request PolicyOverrides
		want                        NetMode
		code                        string
	}{
		{"default none", none, none, none, NetNone, ""},
		{"request none", none, none, net(NetNone), NetNone, ""},
		{"request allowlist above none", none, none, net(NetAllowlist), "", CodePolicyViolation},
		{"request open above none", none, none, net(NetOpen), "", CodePolicyViolation},
		{"settings open, request allowlist", net(NetOpen), none, net(NetAllowlist), NetAllowlist, ""},
		{"settings open, manifest none, request allowlist", net(NetOpen), net(NetNone), net(NetAllowlist), "", CodePolicyViolation},
		{"settings allowlist, request open", net(NetAllowlist), none, net(NetOpen), "", CodePolicyViolation},
		{"manifest escalates", none, net(NetOpen), none, "", CodePolicyViolation},
		{"unknown in request", none, none, net("wide"), "", CodeValidation},
		{"unknown in settings", net("wide"), none, none, "", CodeValidation},
	}
	for _, c := range cases {
		p, err := MergeExecPolicy(DefaultExecPolicy(), c.settings, c.manifest, c.request)
		switch {
		case c.code != "" && ErrorCode(err) != c.code:
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		case c.code == "" && (err != nil || p.NetMode != c.want):
			t.Errorf("%s: got %q, %v; want %q", c.name, p.NetMode, err, c.want)
		}
		var e *Error
		if c.code == CodePolicyViolation && errors.As(err, &e) && e.Details["field"] != "net_mode" {
			t.Errorf("%s: details %v, want field net_mode", c.name, e.Details)
		}
	}
}

// TestMergeExecPolicyLeavesOthersAlone: one layer's field does not touch another field.
func TestMergeExecPolicyLeavesOthersAlone(t *testing.T) {
	p, err := MergeExecPolicy(DefaultExecPolicy(), PolicyOverrides{Pids: p64(512)}, PolicyOverrides{MemoryMB: p64(512)}, PolicyOverrides{TimeoutMS: p64(5000)})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultExecPolicy()
	want.Pids, want.MemoryMB, want.TimeoutMS = 512, 512, 5000
	if p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
}
