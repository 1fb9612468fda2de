package bay

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCutUTF8(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int64
		want string
		cut  bool
	}{
		{"", 0, "", false},
		{"abc", 0, "abc", false},  // no cap
		{"abc", -1, "abc", false}, // no cap
		{"abc", 3, "abc", false},
		{"abc", 4, "abc", false},
		{"abc", math.MaxInt64, "abc", false},
		{"abcd", 3, "abc", true},
		{"abcd", 1, "a", true},
		{"é", 1, "", true},                        // a two-byte character is never split
		{"aé", 2, "a", true},                      //
		{"a€b", 3, "a", true},                     // three bytes: € starts at 1
		{"a€b", 4, "a€", true},                    //
		{"😀😀", 5, "😀", true},                      // four bytes
		{"😀😀", 7, "😀", true},                      //
		{"\xff\xfe\xfd\xfc", 2, "\xff\xfe", true}, // invalid UTF-8 is cut where it is
		{"a\x80\x80\x80\x80\x80", 5, "a\x80\x80\x80\x80", true},
	} {
		got, cut := CutUTF8(c.s, c.max)
		if got != c.want || cut != c.cut {
			t.Errorf("CutUTF8(%q, %d) = %q, %v; want %q, %v", c.s, c.max, got, cut, c.want, c.cut)
		}
	}
}

func TestCheckSize(t *testing.T) {
	for _, c := range []struct {
		size, limit int64
		fails       bool
	}{
		{0, 0, false}, {math.MaxInt64, 0, false}, {5, -1, false}, // no cap
		{-1, 10, false}, // unknown size
		{10, 10, false}, {11, 10, true}, {math.MaxInt64, 10, true}, {math.MaxInt64, math.MaxInt64, false},
	} {
		err := CheckSize("file x", c.size, c.limit, "limits.input_max_bytes")
		if (err != nil) != c.fails {
			t.Errorf("CheckSize(%d, %d) = %v, want failure %v", c.size, c.limit, err, c.fails)
			continue
		}
		if err == nil {
			continue
		}
		e := err.(*Error)
		if e.Code != CodePayloadTooLarge || e.Details["size"] != c.size || e.Details["max_bytes"] != c.limit ||
			!strings.Contains(e.Message, "limits.input_max_bytes") {
			t.Errorf("CheckSize(%d, %d): %+v", c.size, c.limit, e)
		}
	}
	if e := TooLarge("upload", -1, 7, "cargo.max_upload_bytes"); e.Message != "upload is more than the limit of 7 bytes (cargo.max_upload_bytes)" || e.Details["size"] != nil {
		t.Errorf("TooLarge of an unknown size: %+v", e)
	}
}

// TestIOCapsInPolicyJSON: the exec policy's caps keep their place in its JSON (stored with
// every exec record).
func TestIOCapsInPolicyJSON(t *testing.T) {
	b, err := json.Marshal(DefaultExecPolicy())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"max_stdout_bytes":1000000`, `"max_inputs_bytes_total":52428800`, `"timeout_ms":60000`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("policy JSON %s lacks %s", b, k)
		}
	}
}
