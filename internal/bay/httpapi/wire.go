package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// MaxHeaderBytes bounds the header section of a request (http.Server.MaxHeaderBytes; net/http
// allows 4 KiB of slack on top). A larger one is answered 431 headers_too_large.
const MaxHeaderBytes = 64 << 10

// WrapListener returns ln whose connections put the answers net/http writes by itself,
// before any handler runs, into bay's one error envelope: 431 for a header section over
// MaxHeaderBytes, 400 for a malformed request line or header (a NUL or a line break in a
// value, a missing Host) and for what net/http answers 501 (an unknown transfer coding) or 505
// (an unsupported protocol version): those are the client's mistakes too, and a 5xx would
// invite a retry. Those answers are recognised by the exact shape net/http gives them (one
// write of a status line and the headers Content-Type: text/plain; charset=utf-8 and
// Connection: close, nothing else); every other write passes through untouched.
func WrapListener(ln net.Listener, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &envelopeListener{Listener: ln, log: log.With("component", "httpapi")}
}

type envelopeListener struct {
	net.Listener
	log *slog.Logger
}

func (l *envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopeConn{Conn: c, log: l.log}, nil
}

type envelopeConn struct {
	net.Conn
	log *slog.Logger
}

// bareErrorHeaders are the headers of net/http's own error answers.
const bareErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *envelopeConn) Write(b []byte) (int, error) {
	status, msg, ok := parseBareError(b)
	if !ok {
		return c.Conn.Write(b)
	}
	code := bayapi.CodeValidation
	var details map[string]any
	if status == http.StatusNotImplemented || status == http.StatusHTTPVersionNotSupported {
		status = http.StatusBadRequest
	}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		code = bayapi.CodeHeadersTooLarge
		msg = fmt.Sprintf("Request header fields exceed %d bytes", MaxHeaderBytes)
		details = map[string]any{"max_header_bytes": MaxHeaderBytes}
	}
	id := newRequestID()
	body, _ := json.Marshal(bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{Code: code, Message: msg, RequestID: id, Details: details}})
	c.log.Debug("request refused before routing", "request_id", id, "status", status, "code", code, "remote", c.RemoteAddr().String(), "err", msg)
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), bayapi.HeaderRequestID, id, len(body))
	out.Write(body)
	if _, err := c.Conn.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// parseBareError recognises one of net/http's own error answers: "HTTP/1.1 <code> <reason>"
// then bareErrorHeaders then a short text ("<code> <reason>[: <text>]" or a plain message).
// It returns the status and the text to show.
func parseBareError(b []byte) (int, string, bool) {
	const prefix = "HTTP/1.1 "
	if len(b) > 1024 || !bytes.HasPrefix(b, []byte(prefix)) || len(b) < len(prefix)+4 {
		return 0, "", false
	}
	i := bytes.Index(b, []byte(bareErrorHeaders))
	if i < 0 || bytes.IndexByte(b[:i], '\n') >= 0 {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(b[len(prefix) : len(prefix)+3]))
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	text := string(b[i+len(bareErrorHeaders):])
	if p := strconv.Itoa(status) + " "; len(text) > len(p) && text[:len(p)] == p {
		text = text[len(p):]
	}
	return status, text, true
}

// CloseWrite keeps net/http's half-close of a refused connection (it waits for the client to
// read the answer).
func (c *envelopeConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the connection's own ReadFrom (splice, sendfile) for response bodies.
func (c *envelopeConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
