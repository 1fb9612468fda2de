package httpapi

import (
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func BenchmarkUpload(b *testing.B) {
	ws, err := workspace.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{Workspace: ws, MaxUploadBytes: 1 << 40, Log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	const size = 256 << 20
	b.SetBytes(size)
	for b.Loop() {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			mw.WriteField("file_path", "big.bin")
			fw, _ := mw.CreateFormFile("file", "big.bin")
			io.CopyBuffer(fw, io.LimitReader(zeros{}, size), make([]byte, 1<<20))
			mw.Close()
			pw.Close()
		}()
		resp, err := http.Post(srv.URL+"/fs/upload", mw.FormDataContentType(), pr)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}
