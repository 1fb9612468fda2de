package workspace

import (
	"bufio"
	"errors"
	"io"
	"os"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// chunk is the read size of the streaming text operations: what one read of
// a file holds in memory, whatever the file's size.
const chunk = 64 << 10

// Text is a section of a file checked to be UTF-8 text, streamed by WriteJSON
// without holding it in memory. Close releases the file.
type Text struct {
	f   *os.File
	off int64
	n   int64
	Abs string
	// Size is the size of the whole file in bytes.
	Size int64
}

// Len is the length of the section in bytes.
func (t *Text) Len() int64 { return t.n }

// Close closes the file.
func (t *Text) Close() error { return t.f.Close() }

// ReadText opens p for a text read: lines [offset, offset+limit) (1-based;
// offset 0 means 1, a negative limit means to the end), line endings kept.
// Sections over max bytes are refused with file_too_large, invalid UTF-8 with
// invalid_utf8. Memory use does not depend on the file's size: the section is
// found and checked by reading the file in chunks, and WriteJSON reads it again.
func (w *Workspace) ReadText(p string, offset, limit int, max int64) (*Text, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	f, err := as(w, func() (*os.File, error) {
		f, _, err := w.openRegular(rel)
		return f, err
	})
	if err != nil {
		return nil, err
	}
	t, err := w.section(f, rel, offset, limit, max)
	if err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

func (w *Workspace) section(f *os.File, rel string, offset, limit int, max int64) (*Text, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, w.Classify(rel, err)
	}
	t := &Text{f: f, Abs: w.Abs(rel), Size: fi.Size()}
	tooLarge := func() error {
		return apierr.Newf(shipapi.CodeFileTooLarge,
			"%s: the text to read is larger than %d bytes; read fewer lines (offset/limit) or download the file (GET %s)",
			t.Abs, max, shipapi.PathFSDownload)
	}
	if offset < 1 {
		offset = 1
	}
	if offset == 1 && limit < 0 {
		t.n = fi.Size()
	} else if t.off, t.n, err = lineRange(f, offset, limit, max); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, tooLarge()
		}
		return nil, w.Classify(rel, err)
	}
	if t.n > max {
		return nil, tooLarge()
	}
	ok, err := validUTF8(io.NewSectionReader(f, t.off, t.n))
	if err != nil {
		return nil, w.Classify(rel, err)
	}
	if !ok {
		return nil, apierr.New(shipapi.CodeInvalidUTF8, "File is not valid UTF-8 text: "+t.Abs+" (use /fs/download for binary files)")
	}
	return t, nil
}

var errTooLarge = errors.New("section too large")

// lineRange finds the byte range of lines [offset, offset+limit) of r
// (1-based; a negative limit: to the end), stopping once it exceeds max.
func lineRange(r io.Reader, offset, limit int, max int64) (start, n int64, err error) {
	br := bufio.NewReaderSize(r, chunk)
	var pos int64
	start = -1
	for line := 1; limit < 0 || line < offset+limit; {
		if line == offset && start < 0 {
			start = pos
		}
		b, err := br.ReadSlice('\n')
		pos += int64(len(b))
		if start >= 0 && pos-start > max {
			return 0, 0, errTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the same line goes on
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		line++
	}
	if start < 0 { // offset past the end, or no line wanted
		return pos, 0, nil
	}
	return start, pos - start, nil
}

// validUTF8 reports whether everything r yields is UTF-8, reading it in chunks.
func validUTF8(r io.Reader) (bool, error) {
	buf := make([]byte, chunk+utf8.UTFMax)
	carry := 0
	for {
		n, err := r.Read(buf[carry : carry+chunk])
		data := buf[:carry+n]
		cut := fullRunes(data)
		if !utf8.Valid(data[:cut]) {
			return false, nil
		}
		carry = copy(buf, data[cut:])
		if err == io.EOF {
			return carry == 0 || utf8.Valid(buf[:carry]), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// fullRunes is the length of the longest prefix of b that does not end in
// the middle of a UTF-8 sequence (invalid bytes count as whole).
func fullRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// WriteJSON writes the section as one JSON string (quotes included) to w,
// reading it in chunks. Bytes that stopped being UTF-8 since ReadText checked
// them are written as U+FFFD, as encoding/json does.
func (t *Text) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, chunk)
	r := io.NewSectionReader(t.f, t.off, t.n)
	buf := make([]byte, chunk+utf8.UTFMax)
	carry := 0
	bw.WriteByte('"')
	for {
		n, err := r.Read(buf[carry : carry+chunk])
		data := buf[:carry+n]
		cut := fullRunes(data)
		if err == io.EOF {
			cut = len(data)
		}
		escapeJSON(bw, data[:cut])
		carry = copy(buf, data[cut:])
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	bw.WriteByte('"')
	return bw.Flush()
}

const hexDigits = "0123456789abcdef"

// escapeJSON writes b as the inside of a JSON string, escaping what
// encoding/json escapes (HTML characters excepted, as ship's encoder does).
func escapeJSON(w *bufio.Writer, b []byte) {
	start := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			w.Write(b[start:i])
			switch c {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			w.Write(b[start:i])
			switch r {
			case utf8.RuneError:
				w.WriteString(`\ufffd`)
			case '\u2028':
				w.WriteString(`\u2028`)
			default:
				w.WriteString(`\u2029`)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	w.Write(b[start:])
}
