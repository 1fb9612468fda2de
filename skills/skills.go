// Package bundledskills holds the skills shipped in the repository: the JSON Schema of skill
// manifests (_schema/manifest.schema.json), the invocable skills shell.run and python.run and
// the knowledge skill csv-report. Bay validates manifests against the schema; `make run` and
// the tests load the skills into the library (bay's skills.seed_dir).
package bundledskills

import (
	_ "embed"
	"path/filepath"
	"runtime"
)

// ManifestSchema is _schema/manifest.schema.json.
//
//go:embed _schema/manifest.schema.json
var ManifestSchema []byte

// Names are the bundled skills' folder names.
var Names = []string{"csv-report", "python.run", "shell.run"}

// Dir returns this folder in the source tree (for tests and `make run`, which read the skills
// from disk like an operator's seed directory).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}
