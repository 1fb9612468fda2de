package shell

import (
	"slices"
	"testing"
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
