package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Limits bound what one upload may unpack to. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	MaxArchiveBytes  int64 // the archive as sent
	MaxUnpackedBytes int64 // sum of the regular files' sizes
	MaxFiles         int   // entries of every kind
	MaxRatio         int64 // unpacked bytes per archive byte, checked once past 1 MiB unpacked
	MaxPathBytes     int   // one entry's path
}

// DefaultLimits are generous for instructions, scripts and templates and small for a bomb.
var DefaultLimits = Limits{
	MaxArchiveBytes:  32 << 20,
	MaxUnpackedBytes: 64 << 20,
	MaxFiles:         2000,
	MaxRatio:         100,
	MaxPathBytes:     1024,
}

// ratioFloor is the unpacked size under which the compression ratio is not checked: a small
// text file legitimately compresses far beyond any sane ratio.
const ratioFloor = 1 << 20

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxArchiveBytes > 0 {
		d.MaxArchiveBytes = l.MaxArchiveBytes
	}
	if l.MaxUnpackedBytes > 0 {
		d.MaxUnpackedBytes = l.MaxUnpackedBytes
	}
	if l.MaxFiles > 0 {
		d.MaxFiles = l.MaxFiles
	}
	if l.MaxRatio > 0 {
		d.MaxRatio = l.MaxRatio
	}
	if l.MaxPathBytes > 0 {
		d.MaxPathBytes = l.MaxPathBytes
	}
	return d
}

// Entry is one file or symbolic link of a skill tree. Directories are implied by paths.
type Entry struct {
	Path       string // slash-separated, clean, relative to the skill folder
	Data       []byte // regular files
	Executable bool
	Link       string // symlink target; "" for a regular file
}

// Tree is a skill folder held in memory: what an archive or a host folder unpacked to.
type Tree struct {
	// Folder is the single top-level directory the archive wrapped the skill in ("" when
	// SKILL.md was at the archive's root).
	Folder  string
	Entries map[string]*Entry
}

// Paths returns the entries' paths in order.
func (t *Tree) Paths() []string {
	ps := make([]string, 0, len(t.Entries))
	for p := range t.Entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Size is the sum of the regular files' sizes.
func (t *Tree) Size() int64 {
	var n int64
	for _, e := range t.Entries {
		n += int64(len(e.Data))
	}
	return n
}

// Version is the content hash of the tree: sha256 over every entry in path order (kind,
// path, and the file's own sha256 or the link's target). Two uploads of the same content are
// the same version whatever the archive format, timestamps or owners.
func (t *Tree) Version() string {
	h := sha256.New()
	for _, p := range t.Paths() {
		e := t.Entries[p]
		kind := "f"
		switch {
		case e.Link != "":
			kind = "l"
		case e.Executable:
			kind = "x"
		}
		val := e.Link
		if e.Link == "" {
			sum := sha256.Sum256(e.Data)
			val = hex.EncodeToString(sum[:])
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", kind, p, val)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// errStop ends reading an archive at a limit: what follows is not looked at.
var errStop = errors.New("stop")

// reader collects entries and every problem found in them.
type reader struct {
	lim      Limits
	tree     *Tree
	dirs     map[string]bool
	problems []bay.SkillProblem
	unpacked int64
	count    int
	packed   int64
}

func newReader(lim Limits, packed int64) *reader {
	return &reader{lim: lim.withDefaults(), tree: &Tree{Entries: map[string]*Entry{}}, dirs: map[string]bool{}, packed: packed}
}

func (r *reader) problem(file, field, format string, args ...any) {
	r.problems = append(r.problems, bay.SkillProblem{File: file, Field: field, Message: fmt.Sprintf(format, args...)})
}

// ReadArchive unpacks a skill archive (gzip-compressed tar or zip, told apart by their magic
// bytes) into memory. Every entry is checked: no absolute path, no "..", no device, FIFO or
// other special file, symbolic links only to files inside the skill, no entry below a link,
// no duplicate; the whole within lim (file count, unpacked size, compression ratio). The
// problems found are returned, all of them unless a limit stopped the reading; the tree is
// nil when there is any.
func ReadArchive(data []byte, lim Limits) (*Tree, []bay.SkillProblem) {
	r := newReader(lim, int64(len(data)))
	if int64(len(data)) > r.lim.MaxArchiveBytes {
		r.problem("", "", "archive is %d bytes, more than the limit of %d", len(data), r.lim.MaxArchiveBytes)
		return nil, r.problems
	}
	var err error
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		err = r.readTarGz(data)
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		err = r.readZip(data)
	default:
		r.problem("", "", "not a tar.gz or zip archive")
		return nil, r.problems
	}
	if err != nil && !errors.Is(err, errStop) {
		r.problem("", "", "corrupt archive: %v", err)
	}
	return r.finish()
}

// ReadDir reads a skill folder from the host's file system with the same rules as an archive
// (used to load the repository's skills at startup). dir itself is the skill folder.
func ReadDir(dir string, lim Limits) (*Tree, []bay.SkillProblem) {
	r := newReader(lim, 0)
	r.tree.Folder = filepath.Base(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return r.addDir(rel)
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return r.addLink(rel, target)
		case mode.IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return r.addFile(rel, f, info.Size(), mode&0o111 != 0)
		default:
			return r.addSpecial(rel, mode.Type().String())
		}
	})
	if err != nil && !errors.Is(err, errStop) {
		r.problem("", "", "read %s: %v", dir, err)
	}
	return r.finish()
}

func (r *reader) readTarGz(data []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	// The decompressed stream (headers included) is bounded too, so a bomb of empty entries
	// or padding stops as early as one of large files.
	tr := tar.NewReader(&boundedReader{r: gz, left: r.lim.MaxUnpackedBytes + int64(r.lim.MaxFiles+2)*4096, onLimit: func() {
		r.problem("", "", "archive unpacks to more than %d bytes", r.lim.MaxUnpackedBytes)
	}})
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, ok := r.cleanPath(h.Name)
		if !ok {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = r.addDir(name)
		case tar.TypeReg, tar.TypeRegA:
			err = r.addFile(name, tr, h.Size, h.Mode&0o111 != 0)
		case tar.TypeSymlink:
			err = r.addLink(name, h.Linkname)
		case tar.TypeLink:
			err = r.addHardLink(name, h.Linkname)
		case tar.TypeChar, tar.TypeBlock:
			err = r.addSpecial(name, "device file")
		case tar.TypeFifo:
			err = r.addSpecial(name, "FIFO")
		default:
			err = r.addSpecial(name, fmt.Sprintf("entry of tar type %q", h.Typeflag))
		}
		if err != nil {
			return err
		}
	}
}

func (r *reader) readZip(data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return err
	}
	if len(zr.File) > r.lim.MaxFiles {
		r.problem("", "", "archive has %d entries, more than the limit of %d entries", len(zr.File), r.lim.MaxFiles)
		return errStop
	}
	for _, f := range zr.File {
		name, ok := r.cleanPath(f.Name)
		if !ok {
			continue
		}
		mode := f.Mode()
		switch {
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			err = r.addDir(name)
		case mode&fs.ModeSymlink != 0:
			err = r.zipLink(name, f)
		case mode.IsRegular():
			err = r.zipFile(name, f, mode&0o111 != 0)
		case mode&fs.ModeDevice != 0:
			err = r.addSpecial(name, "device file")
		default:
			err = r.addSpecial(name, "special file "+mode.Type().String())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) zipFile(name string, f *zip.File, exec bool) error {
	rc, err := f.Open()
	if err != nil {
		r.problem(name, "", "cannot open entry: %v", err)
		return nil
	}
	defer rc.Close()
	// The declared size may lie; addFile reads at most the budget whatever it says.
	return r.addFile(name, rc, int64(min(f.UncompressedSize64, 1<<62)), exec)
}

func (r *reader) zipLink(name string, f *zip.File) error {
	rc, err := f.Open()
	if err != nil {
		r.problem(name, "", "cannot open entry: %v", err)
		return nil
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, 4097))
	if err != nil || len(target) > 4096 {
		r.problem(name, "", "unreadable or overlong link target")
		return nil
	}
	return r.addLink(name, string(target))
}

// cleanPath checks an entry name and returns it cleaned ("./a//b/" → "a/b"). The archive's
// root itself ("." or "./") is skipped silently.
func (r *reader) cleanPath(name string) (string, bool) {
	switch {
	case name == "":
		r.problem(name, "", "entry without a name")
		return "", false
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\\"):
		r.problem(name, "", "path must be UTF-8 without NUL or backslash")
		return "", false
	case strings.HasPrefix(name, "/") || (len(name) >= 2 && name[1] == ':'):
		r.problem(name, "", "absolute path")
		return "", false
	case len(name) > r.lim.MaxPathBytes:
		r.problem(name[:64]+"...", "", "path longer than %d bytes", r.lim.MaxPathBytes)
		return "", false
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			r.problem(name, "", `path contains ".."`)
			return "", false
		}
		if len(p) > 255 {
			r.problem(name, "", "path element longer than 255 bytes")
			return "", false
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "/"), true
}

// counted charges one entry against the file count; past the limit reading stops.
func (r *reader) counted(name string) error {
	r.count++
	if r.count > r.lim.MaxFiles {
		r.problem(name, "", "more than the limit of %d entries", r.lim.MaxFiles)
		return errStop
	}
	return nil
}

func (r *reader) taken(name string) bool {
	if _, dup := r.tree.Entries[name]; dup || r.dirs[name] {
		r.problem(name, "", "duplicate entry")
		return true
	}
	return false
}

func (r *reader) addDir(name string) error {
	if err := r.counted(name); err != nil {
		return err
	}
	if _, isFile := r.tree.Entries[name]; isFile {
		r.problem(name, "", "duplicate entry")
		return nil
	}
	r.dirs[name] = true
	return nil
}

func (r *reader) addFile(name string, src io.Reader, declared int64, exec bool) error {
	if err := r.counted(name); err != nil {
		return err
	}
	left := r.lim.MaxUnpackedBytes - r.unpacked
	if declared > left {
		r.problem(name, "", "the skill unpacks to more than %d bytes", r.lim.MaxUnpackedBytes)
		return errStop
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(src, left+1))
	if err != nil {
		if errors.Is(err, errStop) {
			return err
		}
		r.problem(name, "", "cannot read entry: %v", err)
		return nil
	}
	r.unpacked += n
	if r.unpacked > r.lim.MaxUnpackedBytes {
		r.problem(name, "", "the skill unpacks to more than %d bytes", r.lim.MaxUnpackedBytes)
		return errStop
	}
	if r.packed > 0 && r.unpacked > ratioFloor && r.unpacked > r.lim.MaxRatio*r.packed {
		r.problem(name, "", "compression ratio above %d:1", r.lim.MaxRatio)
		return errStop
	}
	if r.taken(name) {
		return nil
	}
	r.tree.Entries[name] = &Entry{Path: name, Data: buf.Bytes(), Executable: exec}
	return nil
}

func (r *reader) addLink(name, target string) error {
	if err := r.counted(name); err != nil {
		return err
	}
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsAny(target, "\x00\\") {
		r.problem(name, "", "symbolic link to %q: only relative links to a file inside the skill are allowed", target)
		return nil
	}
	if r.taken(name) {
		return nil
	}
	r.tree.Entries[name] = &Entry{Path: name, Link: target}
	return nil
}

// addHardLink stores a hard link to an earlier regular file as a copy of it.
func (r *reader) addHardLink(name, target string) error {
	clean, ok := r.cleanPath(target)
	if !ok {
		return nil
	}
	t, found := r.tree.Entries[clean]
	if !found || t.Link != "" {
		r.problem(name, "", "hard link to %q, which is not a file of the skill", target)
		return nil
	}
	return r.addFile(name, bytes.NewReader(t.Data), int64(len(t.Data)), t.Executable)
}

func (r *reader) addSpecial(name, what string) error {
	if err := r.counted(name); err != nil {
		return err
	}
	r.problem(name, "", "%s: only regular files, directories and links inside the skill are allowed", what)
	return nil
}

// finish unwraps a single top-level folder, then checks what needs the whole tree: a path
// both a file and a directory, entries below a link, and link targets.
func (r *reader) finish() (*Tree, []bay.SkillProblem) {
	if len(r.problems) > 0 {
		return nil, r.problems
	}
	t := r.tree
	if _, atRoot := t.Entries[SkillFile]; !atRoot && t.Folder == "" {
		top := ""
		single := true
		for p := range t.Entries {
			first, _, _ := strings.Cut(p, "/")
			if top == "" {
				top = first
			}
			single = single && first == top && strings.Contains(p, "/")
		}
		if single && top != "" {
			t.Folder = top
			stripped := make(map[string]*Entry, len(t.Entries))
			for p, e := range t.Entries {
				e.Path = strings.TrimPrefix(p, top+"/")
				stripped[e.Path] = e
			}
			t.Entries = stripped
		}
	}
	for _, p := range t.Paths() {
		e := t.Entries[p]
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if parent, ok := t.Entries[dir]; ok {
				if parent.Link != "" {
					r.problem(p, "", "entry below the symbolic link %s", dir)
				} else {
					r.problem(p, "", "entry below the file %s", dir)
				}
				break
			}
		}
		if e.Link != "" {
			r.checkLink(t, e)
		}
	}
	if len(r.problems) > 0 {
		return nil, r.problems
	}
	return t, nil
}

// checkLink accepts a link whose target, resolved from the link's directory without leaving
// the skill, is a regular file of the skill reached through no other link: then the target
// the kernel resolves is the one checked here.
func (r *reader) checkLink(t *Tree, e *Entry) {
	resolved := resolveLink(e.Path, e.Link)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		r.problem(e.Path, "", "symbolic link to %q leaves the skill", e.Link)
		return
	}
	for dir := path.Dir(resolved); dir != "."; dir = path.Dir(dir) {
		if d, ok := t.Entries[dir]; ok && d.Link != "" {
			r.problem(e.Path, "", "symbolic link to %q goes through another link", e.Link)
			return
		}
	}
	// A ".." after a directory that is itself reached through the link's own path is
	// resolved lexically above; physically it is the same because no directory is a link.
	target, ok := t.Entries[resolved]
	if !ok || target.Link != "" {
		r.problem(e.Path, "", "symbolic link to %q: the target is not a file of the skill", e.Link)
	}
}

// boundedReader fails with errStop once more than left bytes were read.
type boundedReader struct {
	r       io.Reader
	left    int64
	onLimit func()
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.onLimit()
		return 0, errStop
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// resolveLink is the path a checked link points at, relative to the skill folder.
func resolveLink(linkPath, target string) string { return path.Join(path.Dir(linkPath), target) }
