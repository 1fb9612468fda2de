package sdk

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Upload streams r into the workspace file path (POST .../filesystem/upload, multipart field
// "path" then the file part "file"). The body is produced through an io.Pipe while it is
// sent: nothing is buffered, whatever the size. size is the number of bytes r yields; when
// size >= 0 the request carries an exact Content-Length (so bay can refuse an oversized
// upload before reading it) and a reader that yields a different number of bytes fails the
// upload; size < 0 sends the body chunked. The upload is retried (on the safe statuses) only
// when r is an io.ReadSeeker, which is rewound for each attempt.
func (c *Client) Upload(ctx context.Context, id, filePath string, r io.Reader, size int64) (*UploadResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	boundary := multipart.NewWriter(io.Discard).Boundary()
	filename := path.Base(filePath)
	if filename == "." || filename == "/" || filename == "" {
		filename = "file"
	}
	contentLength := int64(-1)
	if size >= 0 {
		// Render the envelope around an empty file once to know the exact overhead.
		var env bytes.Buffer
		if err := writeMultipart(&env, boundary, filePath, filename, bytes.NewReader(nil), 0); err != nil {
			return nil, err
		}
		contentLength = int64(env.Len()) + size
	}
	seeker, replayable := r.(io.ReadSeeker)
	var start int64
	if replayable {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			replayable = false
		}
	}
	var prev chan struct{}
	first := true
	body := func() (io.Reader, error) {
		if prev != nil {
			<-prev // the previous attempt's writer no longer touches r
		}
		if !first {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("sdk: rewind upload body: %w", err)
			}
		}
		first = false
		pr, pw := io.Pipe()
		done := make(chan struct{})
		prev = done
		go func() {
			defer close(done)
			pw.CloseWithError(writeMultipart(pw, boundary, filePath, filename, r, size))
		}()
		return pr, nil
	}
	var out UploadResult
	err := c.doJSON(ctx, &request{
		method: http.MethodPost, path: sbPath(bayapi.PathUpload, id),
		body: body, replayable: replayable, contentLength: contentLength,
		contentType: "multipart/form-data; boundary=" + boundary,
		stream:      true,
	}, &out)
	if prev != nil {
		<-prev
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// writeMultipart writes the whole multipart body; size >= 0 is enforced.
func writeMultipart(w io.Writer, boundary, filePath, filename string, r io.Reader, size int64) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return err
	}
	if err := mw.WriteField(bayapi.UploadPathField, filePath); err != nil {
		return err
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`,
		bayapi.UploadFileField, quoteEscaper.Replace(filename)))
	h.Set("Content-Type", "application/octet-stream")
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if size >= 0 {
		n, err := io.Copy(part, io.LimitReader(r, size))
		if err != nil {
			return fmt.Errorf("sdk: read upload body: %w", err)
		}
		if n != size {
			return fmt.Errorf("sdk: upload body has %d bytes, declared size %d", n, size)
		}
		var one [1]byte
		if m, _ := io.ReadFull(r, one[:]); m > 0 {
			return fmt.Errorf("sdk: upload body is longer than declared size %d", size)
		}
	} else if _, err := io.Copy(part, r); err != nil {
		return fmt.Errorf("sdk: read upload body: %w", err)
	}
	return mw.Close()
}

// Download streams the workspace file path into w (GET .../filesystem/download) and returns
// the number of bytes written. The body is copied as it arrives (no buffering). Errors:
// file_not_found, invalid_path, ship_error. A failure before the first byte is retried; a
// failure while copying is returned as is (w may hold a prefix).
func (c *Client) Download(ctx context.Context, id, filePath string, w io.Writer) (int64, error) {
	if err := checkID("sandbox", id); err != nil {
		return 0, err
	}
	return c.streamTo(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathDownload, id),
		query: url.Values{"path": {filePath}}, stream: true}, w, filePath)
}

// streamTo sends r and copies the answer's body into w as it arrives, checking its length.
func (c *Client) streamTo(ctx context.Context, r *request, w io.Writer, what string) (int64, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.release()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("sdk: download %s: %w", what, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("sdk: download %s: got %d of %d bytes", what, n, resp.ContentLength)
	}
	return n, nil
}
