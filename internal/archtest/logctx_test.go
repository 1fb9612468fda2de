package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// logCtxSkip are the packages of internal/bay this check leaves to their owners.
var logCtxSkip = []string{"console", "egress", "k8s", "jobs", "execs", "drivertest", "fake"}

// TestLoggingKeepsTheContext fails on a slog call without a context (log.Info, s.log.Warn) in a
// function of bay that has one (a context.Context or an *http.Request parameter): the request
// id and owner reach a line only through the context it is logged with (internal/logctx), so a
// line logged without it on a request's behalf cannot be traced to the request.
func TestLoggingKeepsTheContext(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "bay")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			for _, s := range logCtxSkip {
				if rel == s || d.Name() == "testdata" {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !hasContextParam(fn.Type) {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "Info", "Warn", "Error", "Debug":
				default:
					return true
				}
				if isLogger(sel.X) {
					t.Errorf("%s: %s logs without its context: use %sContext(ctx, ...)", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasContextParam reports whether a function takes a context.Context or an *http.Request.
func hasContextParam(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		typ := p.Type
		if st, ok := typ.(*ast.StarExpr); ok {
			typ = st.X
		}
		if sel, ok := typ.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && ((x.Name == "context" && sel.Sel.Name == "Context") || (x.Name == "http" && sel.Sel.Name == "Request")) {
				return true
			}
		}
	}
	return false
}

// isLogger reports whether e names a logger by this repository's habits: log, s.log, cfg.Log,
// opts.Logger.
func isLogger(e ast.Expr) bool {
	name := ""
	switch x := e.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.SelectorExpr:
		name = x.Sel.Name
	}
	switch name {
	case "log", "Log", "logger", "Logger":
		return true
	}
	return false
}
