package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&out, "put x", 4<<20)
	p.now = func() time.Time { return now }
	p.start, p.last = now, now
	now = now.Add(50 * time.Millisecond)
	p.Write(make([]byte, 1<<20)) // within 100 ms of the last draw: not drawn
	if out.Len() != 0 {
		t.Fatalf("drawn too often: %q", out.String())
	}
	now = now.Add(950 * time.Millisecond)
	p.Write(make([]byte, 1<<20)) // 2 MiB after 1 s
	if s := out.String(); !strings.Contains(s, "[============            ]  50% 2.0 MiB / 4.0 MiB 2.0 MiB/s") || !strings.HasPrefix(s, "\r") {
		t.Fatalf("bar: %q", s)
	}
	now = now.Add(time.Second)
	p.Write(make([]byte, 2<<20))
	p.Done()
	if s := out.String(); !strings.HasSuffix(s, "100% 4.0 MiB / 4.0 MiB 2.0 MiB/s\x1b[K\n") {
		t.Fatalf("final: %q", s)
	}
	var none bytes.Buffer
	q := newProgress(nil, "x", -1)
	q.Write([]byte("abc"))
	q.Done()
	if none.Len() != 0 || q.n != 3 {
		t.Fatal("nil output must only count")
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := human(n); got != want {
			t.Errorf("human(%d) = %q, want %q", n, got, want)
		}
	}
}
