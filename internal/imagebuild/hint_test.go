package imagebuild

import (
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// bay's hint for a missing image names the flavour that builds it, for every flavour.
func TestBayKnowsHowToBuildEveryFlavour(t *testing.T) {
	if len(bay.BuiltImages) != len(Flavours) {
		t.Errorf("bay.BuiltImages has %d images, imagebuild %d flavours", len(bay.BuiltImages), len(Flavours))
	}
	for _, f := range Flavours {
		if cmd := bay.BuiltImages[f.DefaultTag()]; !strings.Contains(cmd, "bay image build --flavour "+string(f)+" ") {
			t.Errorf("bay.BuiltImages[%s] = %q, want bay image build --flavour %s", f.DefaultTag(), cmd, f)
		}
	}
}
