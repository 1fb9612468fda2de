package jobs

import (
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// A display line split across reads is emitted once whole; a line past maxDisplayLine, or
// one that is not JSON, is skipped without holding more than maxDisplayLine+1 bytes.
func TestEmitDisplayLines(t *testing.T) {
	var got []string
	emit := func(event string, v any) error {
		got = append(got, event+":"+v.(bayapi.ExecDisplayEvent).Data["text/plain"])
		return nil
	}
	rest, err := emitDisplay(nil, `{"type":"display_data","data":{"text/plain":"a"}}`+"\n"+`{"type":"display_data","da`, emit)
	if err != nil || len(got) != 1 || got[0] != "display:a" {
		t.Fatalf("%v %v", got, err)
	}
	rest, _ = emitDisplay(rest, `ta":{"text/plain":"b"}}`+"\nnot json\n", emit)
	if len(got) != 2 || got[1] != "display:b" || len(rest) != 0 {
		t.Fatalf("%v %q", got, rest)
	}
	big := `{"type":"display_data","data":{"text/plain":"` + strings.Repeat("x", maxDisplayLine) + `"}}`
	rest, _ = emitDisplay(nil, big[:len(big)/2], emit)
	rest, _ = emitDisplay(rest, big[len(big)/2:], emit)
	if len(rest) > maxDisplayLine+1 {
		t.Fatalf("kept %d bytes", len(rest))
	}
	rest, _ = emitDisplay(rest, "\n"+`{"type":"execute_result","data":{"text/plain":"c"}}`+"\n", emit)
	if len(got) != 3 || got[2] != "display:c" || len(rest) != 0 {
		t.Fatalf("%v %d", got, len(rest))
	}
}
