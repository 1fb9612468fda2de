package sqlite

import (
	"fmt"
	"strings"
)

// MemoryPath is the Options.Path of a private in-memory database.
const MemoryPath = ":memory:"

// ParseURL turns a database URL of the reference implementation (SQLAlchemy style) or a plain
// file path into the path Options.Path expects. Accepted forms:
//
//	sqlite+aiosqlite:///./bay.db   relative path ./bay.db (any "+driver" suffix is accepted)
//	sqlite:///bay.db               relative path bay.db
//	sqlite:////var/lib/bay/bay.db  absolute path /var/lib/bay/bay.db
//	sqlite:///:memory:, sqlite://  in-memory database (MemoryPath)
//	:memory:                       in-memory database
//	./bay.db, /abs/bay.db          plain file paths
//
// Any other scheme (postgresql://, mysql://) and URL query strings are refused with an error.
func ParseURL(raw string) (path string, err error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", fmt.Errorf("database url is empty")
	}
	if s == MemoryPath {
		return MemoryPath, nil
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if !hasScheme {
		if strings.Contains(s, ":") && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, ".") {
			// "file:x.db", "postgres:..." and the like are not plain paths.
			return "", fmt.Errorf("database url %q: not a sqlite url or file path", raw)
		}
		return s, nil
	}
	base, _, _ := strings.Cut(scheme, "+")
	if !strings.EqualFold(base, "sqlite") {
		return "", fmt.Errorf("database url %q: scheme %q is not sqlite", raw, scheme)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", fmt.Errorf("database url %q: query parameters are not supported", raw)
	}
	if rest == "" {
		return MemoryPath, nil // sqlite:// is SQLAlchemy's in-memory database
	}
	if !strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("database url %q: a host is not allowed (use sqlite:///relative or sqlite:////absolute)", raw)
	}
	p := rest[1:] // sqlite:///x -> "x", sqlite:////x -> "/x"
	if p == "" {
		return "", fmt.Errorf("database url %q: no path", raw)
	}
	return p, nil
}
