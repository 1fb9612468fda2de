package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// keyPaths lists every configurable key of t ("gc.orphan_container.dry_run",
// "profiles[].containers[].name").
func keyPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
		return keyPaths(t.Elem(), prefix+"[]")
	}
	if t.Kind() != reflect.Struct || t == durationType {
		return []string{prefix}
	}
	if t == reflect.TypeFor[ProxyConfig]() && prefix != "proxy" {
		return []string{prefix} // same keys as the global proxy block
	}
	var out []string
	for name, i := range structFields(t) {
		out = append(out, keyPaths(t.Field(i).Type, joinPath(prefix, name))...)
	}
	return out
}

// TestEveryKeyIsDocumented keeps docs/configuration.md and config.example.yaml complete.
func TestEveryKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keyPaths(reflect.TypeFor[Config](), "") {
		if k == "profiles[].resources" { // documented per sub-key
			continue
		}
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", k)
		}
	}
}
