package shell

import (
	"context"
	"slices"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

func TestSplitArgs(t *testing.T) {
	cases := map[string][]string{
		`ls -la`:                 {"ls", "-la"},
		`echo "a b" 'c d' e\ f`:  {"echo", "a b", "c d", "e f"},
		`printf "x\"y" 'it''s'`:  {"printf", `x"y`, "its"},
		`  spaced   out  `:       {"spaced", "out"},
		`a"b"c`:                  {"abc"},
		`"" x`:                   {"", "x"},
		`echo "back\\slash\$"`:   {"echo", `back\slash$`},
		`echo 'no \escape here'`: {"echo", `no \escape here`},
	}
	for in, want := range cases {
		got, err := SplitArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`echo "open`, `'x`, "   "} {
		if _, err := SplitArgs(bad); err == nil {
			t.Errorf("SplitArgs(%q): no error", bad)
		}
	}
}

func TestCapBuffer(t *testing.T) {
	c := &capBuffer{max: 5}
	for _, s := range []string{"ab", "cde", "fgh"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d %v", s, n, err)
		}
	}
	if c.String() != "abcde" || !c.Truncated() {
		t.Fatalf("got %q truncated=%v", c.String(), c.Truncated())
	}
}

// TestOutputCapAtOneMiB runs real commands with the default caps: exactly 1 MiB is kept and
// flagged only when more was written.
func TestOutputCapAtOneMiB(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	r := New(Config{Workspace: ws})
	for _, c := range []struct {
		cmd       string
		out, err  int
		tout, ter bool
	}{
		{"head -c 1048576 /dev/zero", 1 << 20, 0, false, false},
		{"head -c 1048577 /dev/zero", 1 << 20, 0, true, false},
		{"head -c 3000000 /dev/zero >&2; echo x", 2, 1 << 20, false, true},
	} {
		resp, err := r.Exec(context.Background(), shipapi.ExecShellRequest{Command: c.cmd})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Stdout) != c.out || len(resp.Stderr) != c.err || resp.StdoutTruncated != c.tout || resp.StderrTruncated != c.ter || !resp.Success {
			t.Errorf("%s: stdout %d (truncated %v), stderr %d (truncated %v), success %v", c.cmd,
				len(resp.Stdout), resp.StdoutTruncated, len(resp.Stderr), resp.StderrTruncated, resp.Success)
		}
	}
}
