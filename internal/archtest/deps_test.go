// Package archtest keeps the architecture honest: it checks with `go list -deps` that the
// runtime daemon and the clients link only what they are allowed to.
package archtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/shipyard-dev/shipyard"

// forbidden lists, per package pattern, the import path prefixes it must not link.
var rules = []struct {
	pkg       string
	forbidden []string
	why       string
}{
	{
		pkg: "./cmd/ship",
		forbidden: []string{
			module + "/internal/bay",
			"github.com/moby/", "github.com/docker/", "k8s.io/",
			"modernc.org/sqlite", "github.com/jackc/", "database/sql",
		},
		why: "ship runs inside every sandbox: no engine, database or control-plane code",
	},
	{
		pkg: "./cmd/gull",
		forbidden: []string{
			module + "/internal/bay",
			"github.com/moby/", "github.com/docker/", "k8s.io/",
			"modernc.org/sqlite", "github.com/jackc/", "database/sql",
		},
		why: "gull runs inside every browser sandbox: no engine, database or control-plane code",
	},
	{
		pkg:       "./cmd/bay",
		forbidden: []string{"k8s.io/", "sigs.k8s.io/"},
		why:       "bay's Kubernetes driver speaks the API through internal/bay/k8s/kube: client-go's packages register every API group's types when bay starts, most of its idle memory",
	},
	{pkg: "./sdk/...", forbidden: []string{module + "/internal/"}, why: "the SDK is public API only"},
	{pkg: "./internal/cli/...", forbidden: []string{module + "/internal/bay"}, why: "the CLI talks to bay over HTTP only"},
	{pkg: "./internal/mcp/...", forbidden: []string{module + "/internal/bay"}, why: "the MCP server talks to bay over HTTP only"},
	{pkg: "./api/...", forbidden: []string{module + "/internal/", "github.com/", "golang.org/", "modernc.org/"}, why: "wire types are stdlib only"},
	{pkg: "./internal/bay", forbidden: []string{"github.com/", "golang.org/", "modernc.org/", "database/sql", "net/http"}, why: "the domain is stdlib only and knows no transport"},
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestDependencyRules(t *testing.T) {
	root := repoRoot(t)
	for _, r := range rules {
		t.Run(strings.Trim(r.pkg, "./"), func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", r.pkg)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", r.pkg, err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 {
				t.Fatalf("go list -deps %s listed nothing", r.pkg)
			}
			for _, d := range deps {
				for _, f := range r.forbidden {
					if strings.HasPrefix(d, module) && !strings.HasPrefix(f, module) {
						continue // our own packages are governed by the module-prefixed rules
					}
					if d == strings.TrimSuffix(f, "/") || strings.HasPrefix(d, f) {
						t.Errorf("%s links %s (forbidden prefix %s): %s", r.pkg, d, f, r.why)
					}
				}
			}
		})
	}
}

// services are bay's service packages: they answer domain values (internal/bay) and leave
// decoding requests and rendering the wire types of api/bayapi to internal/bay/httpapi. The
// rule is on their own imports: the runtime clients they use translate the runtimes' errors
// into bay's codes, which the wire package also names.
var services = []string{
	"./internal/bay/sandbox",
	"./internal/bay/capability",
	"./internal/bay/cargo",
	"./internal/bay/history",
	"./internal/bay/skills",
	"./internal/bay/skillrel",
	"./internal/bay/learning",
}

func TestServicesDoNotSpeakTheWire(t *testing.T) {
	root := repoRoot(t)
	for _, pkg := range services {
		t.Run(strings.Trim(pkg, "./"), func(t *testing.T) {
			cmd := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", pkg)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", pkg, err, out)
			}
			imports := strings.Fields(string(out))
			if len(imports) == 0 {
				t.Fatalf("go list %s listed no imports", pkg)
			}
			for _, imp := range imports {
				if imp == module+"/api/bayapi" || strings.HasSuffix(imp, "/internal/bay/httpapi") {
					t.Errorf("%s imports %s: services return domain values and httpapi alone renders the wire types", pkg, imp)
				}
			}
		})
	}
}
