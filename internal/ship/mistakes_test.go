package ship_test

import (
	"bufio"
	"bytes"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// TestClientMistakesDownloadUpload: what TestFilesystemErrors checks for the JSON endpoints,
// for download and upload; and a too large read names the download endpoint.
func TestClientMistakesDownloadUpload(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(filepath.Join(d.workspace, "mdir"), 0o755)
	big := filepath.Join(d.workspace, "big-sparse2.txt")
	if f, err := os.Create(big); err == nil {
		f.Close()
	}
	defer os.Remove(big)
	if err := os.Truncate(big, workspace.MaxTextBytes+1); err != nil {
		t.Fatal(err)
	}
	long, deep := longName, deepPath
	st, b := d.post(t, "/fs/read_file", map[string]any{"path": "big-sparse2.txt"})
	if detail, _ := b["detail"].(string); st != 413 || !strings.Contains(detail, shipapi.PathFSDownload) {
		t.Errorf("too large read does not point at the download endpoint: %d %v", st, b)
	}
	for _, p := range []string{".", "mdir", long, deep} {
		st, b := d.call(t, "GET", "/fs/download?file_path="+url.QueryEscape(p), nil)
		want := shipapi.CodeIsDirectory
		if len(p) > 10 {
			want = shipapi.CodeInvalidPath
		}
		expect(t, st, b, 400, want)
	}
	for _, p := range []string{".", "mdir", long, deep} {
		st, b := upload(t, d, p, strings.NewReader("data"))
		want := shipapi.CodeIsDirectory
		if len(p) > 10 {
			want = shipapi.CodeInvalidPath
		}
		expect(t, st, b, 400, want)
	}
	if _, err := os.Stat(filepath.Join(d.workspace, "mdir", long)); err == nil {
		t.Error("a file with a too long name was created")
	}
}

// TestTruncatedUploadLeavesNothing sends multipart bodies that end early: the answer is a 400
// and neither the target nor a temporary file is left.
func TestTruncatedUploadLeavesNothing(t *testing.T) {
	d := newDaemon(t)
	dir := filepath.Join(d.workspace, "trunc")
	os.RemoveAll(dir) // the upload creates it (as the sandbox user)
	var full bytes.Buffer
	mw := multipart.NewWriter(&full)
	mw.WriteField(shipapi.UploadPathField, "trunc/f.bin")
	fw, _ := mw.CreateFormFile(shipapi.UploadFileField, "f.bin")
	fw.Write(bytes.Repeat([]byte("0123456789"), 100_000))
	mw.Close()
	cut := full.Bytes()[:full.Len()/2]

	for _, c := range []struct {
		name   string
		length int // the Content-Length announced
	}{
		{"body shorter than its length", full.Len()}, // the client stops sending
		{"closing boundary missing", len(cut)},       // the body ends mid-part
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", d.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST /fs/upload HTTP/1.1\r\nHost: ship\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
				testToken, mw.FormDataContentType(), c.length)
			conn.Write(cut)
			conn.(*net.TCPConn).CloseWrite()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b map[string]any
			jsonDecode(resp.Body, &b)
			expect(t, resp.StatusCode, b, 400, shipapi.CodeBadRequest)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				t.Errorf("left behind: %s", e.Name())
			}
		})
	}
}
