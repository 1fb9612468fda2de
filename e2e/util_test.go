package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	for _, layout := range []string{"2006-01-02T15:04:05.999999", time.RFC3339Nano} {
		if v, err := time.Parse(layout, s); err == nil {
			return v.UTC()
		}
	}
	t.Fatalf("bad timestamp %q", s)
	return time.Time{}
}

func randHex(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// buildWheel builds a minimal, valid pure-Python wheel (PEP 427) holding one module with a
// __version__, so that pip can install a pinned requirement with no index.
func buildWheel(t *testing.T, name, version string) []byte {
	t.Helper()
	dist := fmt.Sprintf("%s-%s.dist-info", name, version)
	files := []struct{ path, body string }{
		{name + "/__init__.py", fmt.Sprintf("__version__ = %q\n", version)},
		{dist + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", stringsReplace(name), version)},
		{dist + "/WHEEL", "Wheel-Version: 1.0\nGenerator: shipyard-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	record := ""
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		record += fmt.Sprintf("%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record += dist + "/RECORD,,\n"
	w, _ := zw.Create(dist + "/RECORD")
	w.Write([]byte(record))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func stringsReplace(name string) string {
	out := []byte(name)
	for i, c := range out {
		if c == '_' {
			out[i] = '-'
		}
	}
	return string(out)
}
