package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// ent is one archive entry for the test builders.
type ent struct {
	name     string
	body     string
	typ      byte // tar type; 0 = regular
	link     string
	mode     int64
	size     int64 // declared size override (tar); 0 = len(body)
	repeated int   // body repeated this many times (large files)
}

func (e ent) data() []byte {
	if e.repeated > 0 {
		return bytes.Repeat([]byte(e.body), e.repeated)
	}
	return []byte(e.body)
}

func tarGz(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: mode, ModTime: time.Unix(0, 0)}
		data := e.data()
		if typ == tar.TypeReg {
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

func zipOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := fs.FileMode(e.mode)
		if mode == 0 {
			mode = 0o644
		}
		switch e.typ {
		case tar.TypeSymlink:
			mode |= fs.ModeSymlink
		case tar.TypeDir:
			mode |= fs.ModeDir
		case tar.TypeChar:
			mode |= fs.ModeDevice | fs.ModeCharDevice
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		body := e.data()
		if e.typ == tar.TypeSymlink {
			body = []byte(e.link)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const goodMD = "---\nname: demo\ndescription: A demo skill.\n---\n# Demo\n"

func TestReadArchiveAttacks(t *testing.T) {
	small := Limits{MaxUnpackedBytes: 4 << 20, MaxFiles: 20}
	cases := []struct {
		name string
		ents []ent
		lim  Limits
		want string // substring of a problem; "" = accepted
		file string // the problem's file
	}{
		{"ok flat", []ent{{name: "SKILL.md", body: goodMD}, {name: "scripts/a.sh", body: "echo", mode: 0o755}}, Limits{}, "", ""},
		{"ok folder", []ent{{name: "demo/", typ: tar.TypeDir}, {name: "demo/SKILL.md", body: goodMD}}, Limits{}, "", ""},
		{"ok link inside", []ent{{name: "SKILL.md", body: goodMD}, {name: "references/a.md", body: "a"}, {name: "scripts/b.md", typ: tar.TypeSymlink, link: "../references/a.md"}}, Limits{}, "", ""},
		{"absolute", []ent{{name: "SKILL.md", body: goodMD}, {name: "/etc/passwd", body: "x"}}, Limits{}, "absolute path", "/etc/passwd"},
		{"drive letter", []ent{{name: "SKILL.md", body: goodMD}, {name: "C:/x", body: "x"}}, Limits{}, "absolute path", "C:/x"},
		{"dotdot", []ent{{name: "SKILL.md", body: goodMD}, {name: "a/../../x", body: "x"}}, Limits{}, `".."`, "a/../../x"},
		{"backslash", []ent{{name: "SKILL.md", body: goodMD}, {name: `..\x`, body: "x"}}, Limits{}, "backslash", `..\x`},
		{"link absolute", []ent{{name: "SKILL.md", body: goodMD}, {name: "l", typ: tar.TypeSymlink, link: "/etc/shadow"}}, Limits{}, "only relative links", "l"},
		{"link leaves", []ent{{name: "SKILL.md", body: goodMD}, {name: "a/l", typ: tar.TypeSymlink, link: "../../x"}}, Limits{}, "leaves the skill", "a/l"},
		{"link to missing", []ent{{name: "SKILL.md", body: goodMD}, {name: "l", typ: tar.TypeSymlink, link: "nothing"}}, Limits{}, "not a file of the skill", "l"},
		{"link to dir", []ent{{name: "SKILL.md", body: goodMD}, {name: "d/f", body: "x"}, {name: "l", typ: tar.TypeSymlink, link: "d"}}, Limits{}, "not a file of the skill", "l"},
		{"link through link", []ent{{name: "SKILL.md", body: goodMD}, {name: "d", typ: tar.TypeSymlink, link: "."}, {name: "l", typ: tar.TypeSymlink, link: "d/SKILL.md"}}, Limits{}, "goes through another link", "l"},
		{"write below link", []ent{{name: "SKILL.md", body: goodMD}, {name: "d", typ: tar.TypeSymlink, link: "SKILL.md"}, {name: "d/x", body: "x"}}, Limits{}, "below the symbolic link", "d/x"},
		{"hard link outside", []ent{{name: "SKILL.md", body: goodMD}, {name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}, Limits{}, "absolute path", "/etc/passwd"},
		{"char device", []ent{{name: "SKILL.md", body: goodMD}, {name: "dev", typ: tar.TypeChar}}, Limits{}, "device file", "dev"},
		{"block device", []ent{{name: "SKILL.md", body: goodMD}, {name: "dev", typ: tar.TypeBlock}}, Limits{}, "device file", "dev"},
		{"fifo", []ent{{name: "SKILL.md", body: goodMD}, {name: "p", typ: tar.TypeFifo}}, Limits{}, "FIFO", "p"},
		{"duplicate", []ent{{name: "SKILL.md", body: goodMD}, {name: "./SKILL.md", body: goodMD}}, Limits{}, "duplicate", "SKILL.md"},
		{"too many files", manyFiles(25), small, "more than the limit of 20 entries", ""},
		{"too big", []ent{{name: "SKILL.md", body: goodMD}, {name: "big", body: "0123456789abcdef", repeated: 1 << 18}}, small, "unpacks to more than", ""},
		{"bomb ratio", []ent{{name: "SKILL.md", body: goodMD}, {name: "zeros", body: "\x00", repeated: 3 << 20}}, Limits{MaxRatio: 50}, "compression ratio", "zeros"},
	}
	for _, c := range cases {
		for _, format := range []string{"tar.gz", "zip"} {
			t.Run(c.name+"/"+format, func(t *testing.T) {
				ents := c.ents
				var data []byte
				if format == "zip" {
					var zents []ent
					for _, e := range ents {
						switch e.typ {
						case tar.TypeBlock, tar.TypeFifo, tar.TypeLink:
							continue // zip has no such entries
						}
						zents = append(zents, e)
					}
					if len(zents) < len(ents) {
						t.Skip("no zip form")
					}
					data = zipOf(t, zents...)
				} else {
					data = tarGz(t, ents...)
				}
				tree, problems := ReadArchive(data, c.lim)
				if c.want == "" {
					if len(problems) > 0 || tree == nil {
						t.Fatalf("refused: %+v", problems)
					}
					return
				}
				if tree != nil {
					t.Fatalf("accepted, want %q", c.want)
				}
				for _, p := range problems {
					if strings.Contains(p.Message, c.want) && (c.file == "" || p.File == c.file) {
						return
					}
				}
				t.Fatalf("problems %+v, want %q on %q", problems, c.want, c.file)
			})
		}
	}
}

func manyFiles(n int) []ent {
	ents := []ent{{name: "SKILL.md", body: goodMD}}
	for i := 1; i < n; i++ {
		ents = append(ents, ent{name: "f" + itoa(i), body: "x"})
	}
	return ents
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestReadArchiveEveryProblem: problems are all listed, not just the first.
func TestReadArchiveEveryProblem(t *testing.T) {
	_, problems := ReadArchive(tarGz(t,
		ent{name: "SKILL.md", body: goodMD}, ent{name: "/abs", body: "x"}, ent{name: "../up", body: "x"},
		ent{name: "dev", typ: tar.TypeChar}), Limits{})
	if len(problems) != 3 {
		t.Fatalf("problems %+v, want 3", problems)
	}
}

func TestReadArchiveNotAnArchive(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("hello"), {0x1f, 0x8b, 0, 0}, []byte("PK\x03\x04garbage")} {
		if tree, problems := ReadArchive(data, Limits{}); tree != nil || len(problems) == 0 {
			t.Errorf("%q accepted", data)
		}
	}
}

// TestVersionIgnoresFormat: the version is the content, not the archive.
func TestVersionIgnoresFormat(t *testing.T) {
	ents := []ent{{name: "demo/SKILL.md", body: goodMD}, {name: "demo/scripts/a.sh", body: "echo", mode: 0o755}}
	a, p1 := ReadArchive(tarGz(t, ents...), Limits{})
	b, p2 := ReadArchive(zipOf(t, ents...), Limits{})
	if a == nil || b == nil {
		t.Fatal(p1, p2)
	}
	if a.Version() != b.Version() || a.Folder != "demo" {
		t.Fatalf("versions %s %s folder %q", a.Version(), b.Version(), a.Folder)
	}
	c, _ := ReadArchive(tarGz(t, ent{name: "demo/SKILL.md", body: goodMD}, ent{name: "demo/scripts/a.sh", body: "echo", mode: 0o644}), Limits{})
	if c.Version() == a.Version() {
		t.Fatal("the executable bit is part of the version")
	}
}

func FuzzReadArchive(f *testing.F) {
	f.Add(tarGz(f, ent{name: "SKILL.md", body: goodMD}, ent{name: "l", typ: tar.TypeSymlink, link: "SKILL.md"}))
	f.Add(zipOf(f, ent{name: "d/SKILL.md", body: goodMD}, ent{name: "d/../x", body: "y"}))
	f.Add(tarGz(f, ent{name: "../x", body: "y"}, ent{name: "dev", typ: tar.TypeChar}))
	lim := Limits{MaxUnpackedBytes: 1 << 20, MaxFiles: 50, MaxArchiveBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, problems := ReadArchive(data, lim)
		if tree == nil {
			if len(problems) == 0 {
				t.Fatal("refused without a problem")
			}
			return
		}
		if tree.Size() > lim.MaxUnpackedBytes || len(tree.Entries) > lim.MaxFiles {
			t.Fatalf("limits exceeded: %d bytes, %d entries", tree.Size(), len(tree.Entries))
		}
		for p, e := range tree.Entries {
			if p == "" || strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.Contains(p, "\\") {
				t.Fatalf("unsafe path %q", p)
			}
			if e.Link != "" && (strings.HasPrefix(e.Link, "/") || tree.Entries[resolveLink(p, e.Link)] == nil) {
				t.Fatalf("unsafe link %q -> %q", p, e.Link)
			}
		}
		Validate(tree) // must not panic
	})
}
