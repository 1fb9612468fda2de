package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storetest"
)

func TestSkillConformance(t *testing.T) {
	storetest.RunSkills(t, func(t *testing.T) bay.SkillStore {
		return openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	})
}
