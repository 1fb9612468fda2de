package capability

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// TestCapReader: at most Limit bytes are handed on, however the reads are cut; one byte
// more fails with the limit's error; no limit passes everything.
func TestCapReader(t *testing.T) {
	errBig := errors.New("too large")
	for _, c := range []struct {
		name  string
		size  int
		limit int64
		one   bool // one byte per read
		fails bool
	}{
		{"empty", 0, 4, false, false},
		{"under", 3, 4, false, false},
		{"at", 4, 4, false, false},
		{"at, byte by byte", 4, 4, true, false},
		{"one over", 5, 4, false, true},
		{"one over, byte by byte", 5, 4, true, true},
		{"far over", 1 << 20, 4, false, true},
		{"no limit", 1 << 20, 0, false, false},
	} {
		var r io.Reader = strings.NewReader(strings.Repeat("x", c.size))
		if c.one {
			r = iotest.OneByteReader(r)
		}
		cr := &CapReader{R: r, Limit: c.limit, TooLarge: func() error { return errBig }}
		got, err := io.ReadAll(cr)
		if c.fails != errors.Is(err, errBig) || (!c.fails && err != nil) {
			t.Errorf("%s: err %v, want failure %v", c.name, err, c.fails)
		}
		want := c.size
		if c.fails {
			want = int(c.limit)
		}
		if len(got) != want || cr.N > int64(want)+1 {
			t.Errorf("%s: handed on %d bytes (read %d), want %d", c.name, len(got), cr.N, want)
		}
	}
}

// TestCapPython: text, error and images against the caps, each at and one past its bound.
func TestCapPython(t *testing.T) {
	str := func(s string) *string { return &s }
	img := func(n int) map[string]string { return map[string]string{"image/png": strings.Repeat("A", n)} }
	caps := bay.IOCaps{MaxStdoutBytes: 4, MaxStderrBytes: 3, MaxOutputsBytesTotal: 20}
	for _, c := range []struct {
		name                     string
		in                       bay.PythonResult
		text, err                string
		images                   int
		textCut, errCut, imgsCut bool
	}{
		{"under", bay.PythonResult{Text: "abc", Error: str("e")}, "abc", "e", 0, false, false, false},
		{"at", bay.PythonResult{Text: "abcd", Error: str("eee")}, "abcd", "eee", 0, false, false, false},
		{"over", bay.PythonResult{Text: "abcde", Error: str("eeee")}, "abcd", "eee", 0, true, true, false},
		{"runtime cut kept", bay.PythonResult{Text: "ab", OutputTruncated: true}, "ab", "", 0, true, false, false},
		{"images at the total", bay.PythonResult{Text: "abcd", Images: []map[string]string{img(8), img(8)}}, "abcd", "", 2, false, false, false},
		{"images one past", bay.PythonResult{Text: "abcd", Error: str("e"), Images: []map[string]string{img(8), img(8)}}, "abcd", "e", 1, false, false, true},
		{"first image too big", bay.PythonResult{Images: []map[string]string{img(21)}}, "", "", 0, false, false, true},
	} {
		r := c.in
		capPython(&r, caps)
		e := ""
		if r.Error != nil {
			e = *r.Error
		}
		if r.Text != c.text || e != c.err || len(r.Images) != c.images || r.OutputTruncated != c.textCut || r.ErrorTruncated != c.errCut || r.ImagesTruncated != c.imgsCut {
			t.Errorf("%s: %q %q %d images, cut %v %v %v", c.name, r.Text, e, len(r.Images), r.OutputTruncated, r.ErrorTruncated, r.ImagesTruncated)
		}
	}
}

// TestUploadLimit: an upload passes both the input cap and cargo.max_upload_bytes; the
// smaller names itself.
func TestUploadLimit(t *testing.T) {
	for _, c := range []struct {
		input, cargo, want int64
		key                string
	}{
		{20 << 20, 10 << 30, 20 << 20, "limits.input_max_bytes"},
		{20 << 20, 1 << 20, 1 << 20, "cargo.max_upload_bytes"},
		{20 << 20, 20 << 20, 20 << 20, "limits.input_max_bytes"},
		{20 << 20, 0, 20 << 20, "limits.input_max_bytes"}, // no cargo bound
		{0, 5, 5, "cargo.max_upload_bytes"},               // no input cap
		{0, 0, 0, "limits.input_max_bytes"},               // none: unlimited
	} {
		s := &Service{cfg: Config{Limits: bay.CallLimits{IOCaps: bay.IOCaps{MaxInputBytes: c.input}}}}
		if got, key := s.UploadLimit(c.cargo); got != c.want || key != c.key {
			t.Errorf("UploadLimit(input %d, cargo %d) = %d %s, want %d %s", c.input, c.cargo, got, key, c.want, c.key)
		}
	}
}
