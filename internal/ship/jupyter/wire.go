// Package jupyter is a small Jupyter client (messaging protocol 5.3) for one
// local IPython kernel: it starts `<python> -m ipykernel_launcher -f <file>`,
// talks to it over ZeroMQ (behind the Socket/Transport interfaces, implemented
// with the pure-Go github.com/go-zeromq/zmq4), signs every message with
// HMAC-SHA256 and verifies the signatures of everything it receives.
//
// Output conventions (see Result): text is the concatenation of stream text,
// text/plain of execute_result and of display_data without an image, trimmed
// of surrounding whitespace; images are image/png base64 strings; on error the
// traceback lines are joined by "\n" with ANSI colour codes stripped (the
// reference kept them; agents read this text and escape codes only cost tokens).
package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is the Jupyter messaging protocol version we speak.
const ProtocolVersion = "5.3"

var delimiter = []byte("<IDS|MSG>")

// Header is a Jupyter message header (also used for parent_header).
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is a decoded Jupyter message.
type Message struct {
	Header       Header
	ParentHeader Header
	Metadata     json.RawMessage
	Content      json.RawMessage
}

// ErrBadSignature is returned for a message whose HMAC does not verify.
var ErrBadSignature = errors.New("jupyter: message signature mismatch")

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// signer signs and verifies messages with one session key.
type signer struct{ key []byte }

func (s signer) sign(parts ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write(p)
	}
	sum := m.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// encode builds the frames of a message (no routing identities: DEALER sockets
// need none).
func (s signer) encode(session, msgType string, content any) (id string, frames [][]byte, err error) {
	id = newID()
	h := Header{
		MsgID:    id,
		Session:  session,
		Username: "ship",
		Date:     time.Now().UTC().Format(time.RFC3339Nano),
		MsgType:  msgType,
		Version:  ProtocolVersion,
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return "", nil, fmt.Errorf("encode header: %w", err)
	}
	cb, err := json.Marshal(content)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s content: %w", msgType, err)
	}
	parent, meta := []byte("{}"), []byte("{}")
	sig := s.sign(hb, parent, meta, cb)
	return id, [][]byte{delimiter, sig, hb, parent, meta, cb}, nil
}

// decode parses frames (routing identities or a SUB topic may precede the
// delimiter) and verifies the signature.
func (s signer) decode(frames [][]byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("jupyter: malformed message (%d frames)", len(frames))
	}
	sig, h, p, md, c := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if len(s.key) > 0 {
		want := s.sign(h, p, md, c)
		if !hmac.Equal(want, sig) {
			return nil, ErrBadSignature
		}
	}
	m := &Message{Metadata: md, Content: c}
	if err := json.Unmarshal(h, &m.Header); err != nil {
		return nil, fmt.Errorf("jupyter: decode header: %w", err)
	}
	if len(p) > 2 { // "{}" is the empty parent
		if err := json.Unmarshal(p, &m.ParentHeader); err != nil {
			return nil, fmt.Errorf("jupyter: decode parent header: %w", err)
		}
	}
	return m, nil
}

// ConnectionInfo is the kernel connection file.
type ConnectionInfo struct {
	IP              string `json:"ip"`
	Transport       string `json:"transport"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

func (ci ConnectionInfo) endpoint(port int) string {
	return fmt.Sprintf("%s://%s:%d", ci.Transport, ci.IP, port)
}
