// Package migration reads a store's embedded schema migrations and checks a database's record
// of applied ones against them. The SQLite and PostgreSQL stores share it; each applies the
// files with its own SQL (the policy is in internal/bay/sqlite's package documentation).
package migration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// File is one migrations/NNNN_name.sql file.
type File struct {
	Version  int
	Name     string // file name
	SQL      string
	Checksum string // sha256 hex of the file
}

// Load reads migrations/*.sql of fsys in version order. Names must be NNNN_name.sql with a
// positive, unique NNNN.
func Load(fsys fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []File
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ms = append(ms, File{Version: v, Name: e.Name(), SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Verify checks the applied migrations (version → recorded checksum) against ms: a version ms
// does not have (a newer binary wrote it) or a checksum that differs (the file was edited after
// it was applied) is refused.
func Verify(ms []File, applied map[int]string) error {
	known := make(map[int]File, len(ms))
	for _, m := range ms {
		known[m.Version] = m
	}
	for v, sum := range applied {
		m, ok := known[v]
		if !ok {
			return fmt.Errorf("database has migration %d, unknown to this binary (written by a newer bay?)", v)
		}
		if m.Checksum != sum {
			return fmt.Errorf("migration %s was edited after it was applied (checksum differs): add a new migration instead", m.Name)
		}
	}
	return nil
}
