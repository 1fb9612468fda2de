// Package cdp is a minimal Chrome DevTools Protocol client over the pipe that
// Chromium opens with --remote-debugging-pipe: it reads commands from its fd 3
// and writes answers and events to its fd 4, each message one JSON object
// followed by a NUL byte. There is no TCP debugging port, so nothing else on
// the machine (a page included) can drive the browser.
//
// Sessions are flat (Target.attachToTarget with flatten): a command for a page
// carries the page's sessionId in the same stream.
package cdp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxMessageBytes bounds one message from the browser (a full-page screenshot
// or a PDF arrives base64-encoded in one message).
const MaxMessageBytes = 256 << 20

// ErrClosed is returned by calls on a connection whose pipe is closed (the
// browser exited).
var ErrClosed = errors.New("devtools connection closed")

// ErrTargetClosed is returned by a call that was in flight on a session when
// its target went away (the page closed, its renderer crashed): the browser
// never answers such a call, so without this it would wait for its context
// alone, or forever on a context without a deadline.
var ErrTargetClosed = errors.New("the page closed while the command ran")

// Error is an error answer of the browser to one command.
type Error struct {
	Method  string
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data"`
}

func (e *Error) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Method, e.Message, e.Data)
	}
	return fmt.Sprintf("%s: %s", e.Method, e.Message)
}

// Event is one event of the browser.
type Event struct {
	SessionID string
	Method    string
	Params    json.RawMessage
}

// Caller sends commands; *Conn implements it. Everything above this package
// depends on this interface only.
type Caller interface {
	// Call sends method with params (marshalled to JSON, nil for none) to the
	// target of sessionID ("" = the browser) and decodes the result into
	// result (nil to drop it).
	Call(ctx context.Context, sessionID, method string, params, result any) error
	// Subscribe returns a channel of the events whose method is one of
	// methods, and a function that ends the subscription. Events that find
	// the channel full are dropped for that subscriber.
	Subscribe(methods ...string) (<-chan Event, func())
}

var _ Caller = (*Conn)(nil)

// Conn is one DevTools connection.
type Conn struct {
	w io.WriteCloser
	// wsem is held by the one writer of a message; a channel, not a mutex,
	// so that a caller whose context ends stops waiting for a browser that
	// does not read its pipe.
	wsem chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]*call
	subs    map[*sub]struct{}
	err     error // set once the reader stopped
	done    chan struct{}
}

type sub struct {
	methods map[string]bool
	ch      chan Event
}

type reply struct {
	result json.RawMessage
	err    *Error
	gone   bool // the session's target went away: no answer will come
}

// call is one command waiting for its answer.
type call struct {
	sessionID string
	ch        chan reply // buffered: one reply, or closed with the connection
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *Error          `json:"error,omitempty"`
}

// New starts reading r (the browser's fd 4) and writes commands to w (its
// fd 3). The connection ends when r reaches EOF or fails.
func New(r io.Reader, w io.WriteCloser) *Conn {
	c := &Conn{w: w, wsem: make(chan struct{}, 1), pending: map[int64]*call{}, subs: map[*sub]struct{}{}, done: make(chan struct{})}
	go c.read(r)
	return c
}

// Done is closed when the connection ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the write side; the browser then exits.
func (c *Conn) Close() error { return c.w.Close() }

func (c *Conn) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var msg []byte
		msg, err = readMessage(br)
		if err != nil {
			break
		}
		var m message
		if jerr := json.Unmarshal(msg, &m); jerr != nil {
			continue // not ours to fix; the browser never sends invalid JSON
		}
		c.dispatch(m)
	}
	if errors.Is(err, io.EOF) {
		err = ErrClosed
	}
	c.mu.Lock()
	c.err = err
	for id, pc := range c.pending {
		close(pc.ch)
		delete(c.pending, id)
	}
	for s := range c.subs {
		close(s.ch)
		delete(c.subs, s)
	}
	c.mu.Unlock()
	close(c.done)
}

// readMessage reads up to the next NUL byte, bounded by MaxMessageBytes.
func readMessage(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice(0)
		buf = append(buf, chunk...)
		if len(buf) > MaxMessageBytes {
			return nil, fmt.Errorf("devtools message larger than %d bytes", MaxMessageBytes)
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func (c *Conn) dispatch(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.ID != 0 {
		if pc, ok := c.pending[m.ID]; ok {
			delete(c.pending, m.ID)
			pc.ch <- reply{result: m.Result, err: m.Error}
		}
		return
	}
	if m.Method == "" {
		return
	}
	switch m.Method {
	case "Target.detachedFromTarget": // on the browser session, naming the page's session
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && p.SessionID != "" {
			c.abandonLocked(p.SessionID)
		}
	case "Inspector.targetCrashed", "Inspector.detached": // on the page's own session
		if m.SessionID != "" {
			c.abandonLocked(m.SessionID)
		}
	}
	ev := Event{SessionID: m.SessionID, Method: m.Method, Params: m.Params}
	for s := range c.subs {
		if s.methods[m.Method] {
			select {
			case s.ch <- ev:
			default:
			}
		}
	}
}

// abandonLocked ends the calls in flight on sessionID: its target is gone
// and the browser drops them unanswered. c.mu is held.
func (c *Conn) abandonLocked(sessionID string) {
	for id, pc := range c.pending {
		if pc.sessionID == sessionID {
			delete(c.pending, id)
			pc.ch <- reply{gone: true}
		}
	}
}

// Subscribe implements Caller.
func (c *Conn) Subscribe(methods ...string) (<-chan Event, func()) {
	s := &sub{methods: map[string]bool{}, ch: make(chan Event, 64)}
	for _, m := range methods {
		s.methods[m] = true
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		close(s.ch)
		return s.ch, func() {}
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s.ch, func() {
		c.mu.Lock()
		if _, ok := c.subs[s]; ok {
			delete(c.subs, s)
			close(s.ch)
		}
		c.mu.Unlock()
	}
}

// Call implements Caller.
func (c *Conn) Call(ctx context.Context, sessionID, method string, params, result any) error {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("%s: encode params: %w", method, err)
		}
		raw = b
	}
	pc := &call{sessionID: sessionID, ch: make(chan reply, 1)}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = pc
	c.mu.Unlock()

	b, err := json.Marshal(message{ID: id, SessionID: sessionID, Method: method, Params: raw})
	if err != nil {
		c.forget(id)
		return fmt.Errorf("%s: encode: %w", method, err)
	}
	if err := c.write(ctx, append(b, 0)); err != nil {
		c.forget(id)
		return fmt.Errorf("%s: write: %w", method, err)
	}
	select {
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	case rep, ok := <-pc.ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, ErrClosed)
		}
		if rep.gone {
			return fmt.Errorf("%s: %w", method, ErrTargetClosed)
		}
		if rep.err != nil {
			rep.err.Method = method
			return rep.err
		}
		if result != nil && len(rep.result) > 0 {
			if err := json.Unmarshal(rep.result, result); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	}
}

// write writes one whole message. A browser that stops reading its pipe
// (stopped, or busy for longer than the caller can wait) blocks the write
// once the pipe's buffer is full: the caller then returns when ctx ends,
// while the write goes on in the background and the next writer waits for
// it, so that messages are never interleaved.
func (c *Conn) write(ctx context.Context, msg []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.w.Write(msg)
		<-c.wsem
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}
