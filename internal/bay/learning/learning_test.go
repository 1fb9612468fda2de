package learning

import (
	"fmt"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestSegments(t *testing.T) {
	act := func(cmd string) step { return step{Kind: "individual_action", Cmd: cmd} }
	failed := func(cmd string) step { return step{Kind: "individual_action", Cmd: cmd, ExitCode: 1} }
	cases := []struct {
		name  string
		steps []step
		want  string
	}{
		{"one flow", []step{act("open x"), act("fill #a 1"), act("click b")}, "[[open x fill #a 1 click b]]"},
		{"a single action is no segment", []step{act("open x")}, "[]"},
		{"read-only steps split", []step{act("open x"), act("snapshot -i"), act("fill #a 1"), act("click b"), act("get title"), act("click c")}, "[[fill #a 1 click b]]"},
		{"every read-only prefix", []step{act("click a"), act("get url"), act("is visible x"), act("wait 10"), act("cookies"), act("storage x"),
			act("network requests"), act("tab new"), act("frame main"), act("dialog accept"), act("click b")}, "[]"},
		{"failures split", []step{act("open x"), act("click a"), failed("click b"), act("click c"), act("click d")}, "[[open x click a] [click c click d]]"},
		{"other kinds split", []step{act("open x"), {Kind: "note", Cmd: "click a"}, act("click b")}, "[]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(Segments(c.steps)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestKeys(t *testing.T) {
	tags := "a,skill:login,skill:other"
	if k := skillKey(&bay.Execution{Tags: &tags, SandboxID: "sandbox-1"}); k != "login" {
		t.Errorf("skill key from tags = %q", k)
	}
	if k := skillKey(&bay.Execution{SandboxID: "sandbox-1"}); k != "browser-sandbox-1" {
		t.Errorf("skill key without tags = %q", k)
	}
	for in, want := range map[string]string{"Log in, then check out!": "log-in-then-check-out", "!!!": "",
		"ÉTÉ 2026": "t-2026", string(make([]byte, 0)) + "x" + fmt.Sprintf("%070d", 0): "x" + fmt.Sprintf("%063d", 0)} {
		got := scenarioKey(&in)
		if (got == nil && want != "") || (got != nil && *got != want) {
			t.Errorf("scenario key of %q = %v, want %q", in, got, want)
		}
	}
	if scenarioKey(nil) != nil {
		t.Error("scenario key of no description")
	}
}
