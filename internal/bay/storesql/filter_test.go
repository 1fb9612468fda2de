package storesql

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The filters' meaning is tested on both stores by internal/bay/storetest; this checks the
// clause mechanics: numbered placeholders follow the argument order, the dialect converts
// values, tag patterns escape LIKE's wildcards.
func TestClause(t *testing.T) {
	d := &Dialect{
		Placeholder: func(n int) string { return fmt.Sprint("$", n) },
		Time:        func(t time.Time) any { return t.Unix() },
		Bool:        func(b bool) any { return fmt.Sprint(b) },
		TagMatch:    func(w *Where, p string) string { return "tags LIKE " + w.Arg(p) },
	}
	if w := Sandboxes(d, bay.SandboxQuery{IncludeDeleted: true}); w.SQL() != "" || len(w.Args()) != 0 {
		t.Fatalf("no filter: %q %v", w.SQL(), w.Args())
	}
	warm := true
	w := Sandboxes(d, bay.SandboxQuery{Owner: "alice", Warm: &warm, ExpiredBefore: &time.Time{}, CargoID: "ws-1"})
	want := " WHERE owner = $1 AND deleted_at IS NULL AND is_warm = $2 AND expires_at < $3 AND cargo_id = $4"
	if w.SQL() != want || fmt.Sprint(w.Args()) != fmt.Sprint([]any{"alice", "true", time.Time{}.Unix(), "ws-1"}) {
		t.Fatalf("got %q %v", w.SQL(), w.Args())
	}
	w = Executions(d, bay.ExecutionQuery{Tags: []string{"a_b", "", `100%\`}})
	if !strings.Contains(w.SQL(), "(tags LIKE $1 OR tags LIKE $2)") ||
		fmt.Sprint(w.Args()) != fmt.Sprint([]any{`%a\_b%`, `%100\%\\%`}) {
		t.Fatalf("tags: %q %v", w.SQL(), w.Args())
	}
}
