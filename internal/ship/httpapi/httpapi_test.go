package httpapi

import (
	"mime"
	"testing"
)

func TestContentDisposition(t *testing.T) {
	for name, want := range map[string]string{
		"plain.txt":     `attachment; filename="plain.txt"; filename*=UTF-8''plain.txt`,
		"a b\"c\\d.bin": `attachment; filename="a b_c_d.bin"; filename*=UTF-8''a%20b%22c%5Cd.bin`,
		"报告.pdf":        `attachment; filename="__.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.pdf`,
	} {
		got := ContentDisposition(name)
		if got != want {
			t.Errorf("ContentDisposition(%q) = %s; want %s", name, got, want)
		}
		// The standard parser prefers filename* and recovers the exact name.
		_, params, err := mime.ParseMediaType(got)
		if err != nil || params["filename"] != name {
			t.Errorf("parse %s: %v %q", got, err, params["filename"])
		}
	}
}
