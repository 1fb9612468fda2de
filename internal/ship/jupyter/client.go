package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("jupyter: client closed")

// Client is connected to one kernel's shell, control, iopub and heartbeat
// channels. One reader goroutine per channel routes every verified message to
// the pending request whose msg_id is its parent_header.msg_id; messages with
// any other parent are dropped, so outputs never leak between executions.
type Client struct {
	log     *slog.Logger
	sig     signer
	session string
	ci      ConnectionInfo
	tr      Transport

	shell, control, iopub Socket

	sendMu sync.Mutex // guards Send on shell and control

	mu      sync.Mutex
	pending map[string]*inbox // by request msg_id; guarded by mu
	closed  chan struct{}
	once    sync.Once
}

// inbox is an unbounded queue of messages for one request.
type inbox struct {
	mu     sync.Mutex
	msgs   []*Message
	notify chan struct{} // capacity 1
}

func (b *inbox) put(m *Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []*Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

// Dial connects to a kernel described by ci.
func Dial(ctx context.Context, tr Transport, ci ConnectionInfo, log *slog.Logger) (*Client, error) {
	if ci.SignatureScheme != "" && ci.SignatureScheme != "hmac-sha256" {
		return nil, fmt.Errorf("jupyter: unsupported signature scheme %q", ci.SignatureScheme)
	}
	c := &Client{
		log:     log,
		sig:     signer{key: []byte(ci.Key)},
		session: newID(),
		ci:      ci,
		tr:      tr,
		pending: make(map[string]*inbox),
		closed:  make(chan struct{}),
	}
	var err error
	if c.iopub, err = tr.Dial(ctx, Sub, ci.endpoint(ci.IOPubPort)); err != nil {
		return nil, fmt.Errorf("iopub: %w", err)
	}
	if c.shell, err = tr.Dial(ctx, Dealer, ci.endpoint(ci.ShellPort)); err != nil {
		c.iopub.Close()
		return nil, fmt.Errorf("shell: %w", err)
	}
	if c.control, err = tr.Dial(ctx, Dealer, ci.endpoint(ci.ControlPort)); err != nil {
		c.iopub.Close()
		c.shell.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	for name, s := range map[string]Socket{"shell": c.shell, "control": c.control, "iopub": c.iopub} {
		go c.readLoop(name, s)
	}
	return c, nil
}

// Close closes all sockets; pending calls fail with ErrClosed.
func (c *Client) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.shell.Close()
		c.control.Close()
		c.iopub.Close()
	})
	return nil
}

func (c *Client) readLoop(name string, s Socket) {
	for {
		frames, err := s.Recv()
		if err != nil {
			select {
			case <-c.closed:
			default:
				c.log.Debug("jupyter channel closed", "channel", name, "err", err)
			}
			return
		}
		m, err := c.sig.decode(frames)
		if err != nil {
			c.log.Warn("dropping kernel message", "channel", name, "err", err)
			continue
		}
		c.mu.Lock()
		b := c.pending[m.ParentHeader.MsgID]
		c.mu.Unlock()
		if b != nil {
			b.put(m)
		}
	}
}

// request sends msgType on sock and registers an inbox for its replies.
// The caller must call c.done(id) when finished.
func (c *Client) request(sock Socket, msgType string, content any) (string, *inbox, error) {
	select {
	case <-c.closed:
		return "", nil, ErrClosed
	default:
	}
	id, frames, err := c.sig.encode(c.session, msgType, content)
	if err != nil {
		return "", nil, err
	}
	b := &inbox{notify: make(chan struct{}, 1)}
	c.mu.Lock()
	c.pending[id] = b
	c.mu.Unlock()
	c.sendMu.Lock()
	err = sock.Send(frames)
	c.sendMu.Unlock()
	if err != nil {
		c.done(id)
		return "", nil, fmt.Errorf("send %s: %w", msgType, err)
	}
	return id, b, nil
}

func (c *Client) done(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// KernelInfo sends kernel_info_request until both its reply and an iopub
// message for it arrive. Seeing iopub traffic is the slow-joiner guard: a SUB
// socket drops everything published before its subscription reached the
// kernel, so no execution may start before that.
func (c *Client) KernelInfo(ctx context.Context) (json.RawMessage, error) {
	for {
		id, b, err := c.request(c.shell, "kernel_info_request", struct{}{})
		if err != nil {
			return nil, err
		}
		var reply json.RawMessage
		gotIOPub := false
		retry := time.NewTimer(250 * time.Millisecond)
	wait:
		for {
			select {
			case <-b.notify:
				for _, m := range b.take() {
					switch m.Header.MsgType {
					case "kernel_info_reply":
						reply = m.Content
					case "status":
						gotIOPub = true
					}
				}
				if reply != nil && gotIOPub {
					retry.Stop()
					c.done(id)
					return reply, nil
				}
			case <-retry.C:
				break wait // resend; the old request's late replies are dropped
			case <-ctx.Done():
				c.done(id)
				return nil, fmt.Errorf("kernel_info: %w", ctx.Err())
			case <-c.closed:
				c.done(id)
				return nil, ErrClosed
			}
		}
		c.done(id)
	}
}

// Result is the collected output of one execution.
type Result struct {
	Status         string // ok | error | aborted ("" when no reply arrived)
	ExecutionCount *int
	Text           string
	Images         []string // base64 image/png
	Error          string   // traceback, ANSI stripped
	// Stdout and Stderr are the stream messages of each name apart (Text has both, with the
	// rich outputs' text), each within the text limit.
	Stdout, Stderr string
	// TextTruncated and ImagesTruncated say output was dropped at the limits.
	TextTruncated   bool
	ImagesTruncated bool
}

// Execution is a running execute_request.
type Execution struct {
	c        *Client
	id       string
	b        *inbox
	text     strings.Builder
	streams  [2]strings.Builder // stdout, stderr
	res      Result
	gotReply bool
	gotIdle  bool
	// Output limits (0: none): text bytes and base64 image bytes kept.
	maxText, maxImages int
	imageBytes         int
	// on, when set, is told every output as it arrives (see Observe).
	on func(Event)
}

// Event is one output of a running cell, as the kernel publishes it: a stream message's text
// (Stream "stdout" or "stderr") or a rich output (Display).
type Event struct {
	Stream  string
	Text    string
	Display *shipapi.DisplayEvent
}

// Observe has on called with every output of the execution as Wait receives it, before it is
// collected (and whether or not it is kept within the limits).
func (e *Execution) Observe(on func(Event)) { e.on = on }

// Limit bounds the output kept: maxText bytes of text and maxImages bytes of
// base64 images; what is dropped beyond them sets the Truncated flags.
func (e *Execution) Limit(maxText, maxImages int) { e.maxText, e.maxImages = maxText, maxImages }

// addText appends s to the text output within the limit.
func (e *Execution) addText(s string) { e.add(&e.text, s) }

// add appends s to b within the text limit.
func (e *Execution) add(b *strings.Builder, s string) {
	if e.maxText > 0 {
		room := e.maxText - b.Len()
		if room < len(s) {
			e.res.TextTruncated = true
			cut := max(room, 0)
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut-- // never split a character
			}
			s = s[:cut]
		}
	}
	b.WriteString(s)
}

// Execute sends an execute_request; collect its output with Wait.
func (c *Client) Execute(code string, silent bool) (*Execution, error) {
	id, b, err := c.request(c.shell, "execute_request", map[string]any{
		"code":             code,
		"silent":           silent,
		"store_history":    !silent,
		"user_expressions": map[string]any{},
		"allow_stdin":      false,
		// Calls are serialised, so nothing is ever queued behind a failing
		// cell. With true, ipykernel aborts requests that arrive shortly
		// after an error (its abort window races with our next call).
		"stop_on_error": false,
	})
	if err != nil {
		return nil, err
	}
	return &Execution{c: c, id: id, b: b}, nil
}

// Wait collects output until the execution is complete (its execute_reply
// and its iopub status idle both arrived), ctx ends, abort is closed (the
// kernel died) or the client closes. It may be called again after a ctx
// error, e.g. after an interrupt, and then continues where it stopped.
func (e *Execution) Wait(ctx context.Context, abort <-chan struct{}) error {
	for !(e.gotReply && e.gotIdle) {
		select {
		case <-e.b.notify:
			for _, m := range e.b.take() {
				e.handle(m)
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-abort:
			return errAborted
		case <-e.c.closed:
			return ErrClosed
		}
	}
	return nil
}

var errAborted = errors.New("jupyter: execution aborted")

// Close unregisters the execution; later messages for it are dropped.
func (e *Execution) Close() { e.c.done(e.id) }

// Result returns what was collected so far.
func (e *Execution) Result() Result {
	r := e.res
	r.Text = strings.TrimSpace(e.text.String())
	r.Stdout, r.Stderr = e.streams[0].String(), e.streams[1].String()
	return r
}

type mimeBundle map[string]json.RawMessage

func (mb mimeBundle) str(k string) (string, bool) {
	raw, ok := mb[k]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func (e *Execution) appendBlock(s string) {
	if e.text.Len() > 0 && !strings.HasSuffix(e.text.String(), "\n") {
		e.addText("\n")
	}
	e.addText(s)
}

func (e *Execution) handle(m *Message) {
	switch m.Header.MsgType {
	case "stream":
		var c struct {
			Name string `json:"name"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			i := 0
			if c.Name == "stderr" {
				i = 1
			}
			if e.on != nil {
				e.on(Event{Stream: []string{"stdout", "stderr"}[i], Text: c.Text})
			}
			e.addText(c.Text)
			e.add(&e.streams[i], c.Text)
		}
	case "execute_result", "display_data":
		var c struct {
			Data mimeBundle `json:"data"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return
		}
		if e.on != nil {
			d := &shipapi.DisplayEvent{Type: m.Header.MsgType, Data: map[string]string{}}
			for k := range c.Data {
				if v, ok := c.Data.str(k); ok {
					d.Data[k] = v
				}
			}
			e.on(Event{Display: d})
		}
		img, hasImg := c.Data.str("image/png")
		if hasImg {
			img = strings.TrimSpace(img)
			if e.maxImages > 0 && e.imageBytes+len(img) > e.maxImages {
				e.res.ImagesTruncated = true
			} else {
				e.imageBytes += len(img)
				e.res.Images = append(e.res.Images, img)
			}
		}
		if txt, ok := c.Data.str("text/plain"); ok && (m.Header.MsgType == "execute_result" || !hasImg) {
			e.appendBlock(txt)
		}
	case "error":
		var c struct {
			EName     string   `json:"ename"`
			EValue    string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			tb := StripANSI(strings.Join(c.Traceback, "\n"))
			if strings.TrimSpace(tb) == "" {
				tb = c.EName + ": " + c.EValue
			}
			e.res.Error = tb
		}
	case "status":
		var c struct {
			State string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &c) == nil && c.State == "idle" {
			e.gotIdle = true
		}
	case "execute_reply":
		var c struct {
			Status         string `json:"status"`
			ExecutionCount *int   `json:"execution_count"`
			EName          string `json:"ename"`
			EValue         string `json:"evalue"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			e.gotReply = true
			e.res.Status = c.Status
			e.res.ExecutionCount = c.ExecutionCount
			if c.Status == "error" && e.res.Error == "" {
				e.res.Error = c.EName + ": " + c.EValue
			}
		}
	}
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]`)

// StripANSI removes ANSI escape sequences (IPython colours its tracebacks).
func StripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// Interrupt sends interrupt_request on the control channel (for kernels whose
// interrupt_mode is "message"); it does not wait for the reply.
func (c *Client) Interrupt() error {
	id, _, err := c.request(c.control, "interrupt_request", struct{}{})
	if err != nil {
		return err
	}
	c.done(id)
	return nil
}

// Shutdown sends shutdown_request on control and waits (bounded by ctx) for
// the reply.
func (c *Client) Shutdown(ctx context.Context) error {
	id, b, err := c.request(c.control, "shutdown_request", map[string]any{"restart": false})
	if err != nil {
		return err
	}
	defer c.done(id)
	for {
		select {
		case <-b.notify:
			for _, m := range b.take() {
				if m.Header.MsgType == "shutdown_reply" {
					return nil
				}
			}
		case <-ctx.Done():
			return fmt.Errorf("shutdown_request: %w", ctx.Err())
		case <-c.closed:
			return ErrClosed
		}
	}
}

// Ping sends one heartbeat on a fresh REQ socket and waits for the echo.
// A fresh socket per ping keeps a lost reply from wedging the REQ state machine.
func Ping(ctx context.Context, tr Transport, ci ConnectionInfo) error {
	s, err := tr.Dial(ctx, Req, ci.endpoint(ci.HBPort))
	if err != nil {
		return err
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		if err := s.Send([][]byte{[]byte("ping")}); err != nil {
			done <- err
			return
		}
		_, err := s.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("heartbeat: %w", ctx.Err())
	}
}
