// Package pty serves interactive terminals over WebSocket: one PTY per
// connection running a login bash (`bash -l`) in the workspace as the
// sandbox user.
//
// Wire: PTY output is sent as binary frames (raw bytes; the reference sent
// UTF-8 text with replacement, which corrupted binary output). Client text
// and binary frames are written to the PTY as they are, except a text frame
// that parses as {"type":"resize","cols":C,"rows":R}, which resizes it.
// When the socket closes, every process of the terminal's session is killed
// (bash puts each job in its own process group, so killing one group is not
// enough). When the shell exits by itself, ship closes the socket normally
// with the reason "exit N" (shipapi.TerminalExitReason): its exit status.
package pty

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
)

// Handler serves GET /term/ws?cols=80&rows=24.
type Handler struct {
	Dir string   // working directory (the workspace)
	Env []string // environment of the shell
	Log *slog.Logger
	// Shell is the program started; default "bash" with args "-l".
	Shell []string
	// User is the sandbox user the shell runs as (nil: ship's own user); the
	// PTY is opened as that user too, so its device belongs to it.
	User *privsep.User

	wg sync.WaitGroup
}

func dim(q string, def, max int) uint16 {
	n, err := strconv.Atoi(q)
	if err != nil || n <= 0 {
		return uint16(def)
	}
	return uint16(min(n, max))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cols := dim(r.URL.Query().Get("cols"), 80, 1000)
	rows := dim(r.URL.Query().Get("rows"), 24, 1000)
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		log.Warn("terminal websocket accept", "err", err)
		return
	}
	conn.SetReadLimit(1 << 20)
	h.wg.Add(1)
	defer h.wg.Done()

	cmd, ptmx, err := h.start(cols, rows)
	if err != nil {
		log.Error("start terminal shell", "err", err)
		conn.Close(websocket.StatusInternalError, "cannot start shell")
		return
	}
	sid := cmd.Process.Pid
	log.Info("terminal opened", "pid", sid, "cols", cols, "rows", rows)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	// PTY -> socket. The PTY ends (EIO) when the shell and every process holding it are gone.
	// Then the socket is closed normally with the shell's exit status, which also ends the
	// read loop below (the close handshake; cancelling its context would drop the socket
	// without a close frame).
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					cancel()
					return
				}
			}
			if err != nil {
				break // EIO once the shell side is gone
			}
		}
		select {
		case <-exited:
			conn.Close(websocket.StatusNormalClosure, shipapi.TerminalExitReason+strconv.Itoa(exitStatus(cmd.ProcessState)))
		case <-time.After(time.Second):
			conn.Close(websocket.StatusNormalClosure, "")
		case <-ctx.Done():
		}
		cancel()
	}()

	// Socket -> PTY.
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			break
		}
		if typ == websocket.MessageText && isResize(data, ptmx) {
			continue
		}
		if _, err := ptmx.Write(data); err != nil {
			break
		}
	}
	cancel()
	killSession(sid)
	ptmx.Close()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		log.Warn("terminal shell not reaped", "pid", sid)
	}
	<-outDone
	conn.Close(websocket.StatusNormalClosure, "") // a no-op when the shell's exit closed it
	log.Info("terminal closed", "pid", sid)
}

// start starts the shell on a new PTY. When the sandbox ran out of processes
// (EAGAIN: its pids limit; under gVisor, RLIMIT_NPROC filled, found before the
// start) it kills every process of the sandbox user and tries (once more).
func (h *Handler) start(cols, rows uint16) (cmd *exec.Cmd, ptmx *os.File, err error) {
	if h.User.AtProcessLimit() {
		h.killAll()
	}
	for attempt := 0; ; attempt++ {
		argv := h.Shell
		if len(argv) == 0 {
			argv = []string{"bash", "-l"}
		}
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Dir = h.Dir
		cmd.Env = append(append([]string(nil), h.Env...), "TERM=xterm-256color", "PWD="+h.Dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		h.User.Apply(cmd.SysProcAttr)
		// pty.StartWithSize makes the shell a session leader with the PTY as
		// its controlling terminal (Setsid, Setctty).
		err = h.User.Do(func() error {
			var err error
			ptmx, err = pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: rows})
			return err
		})
		if err == nil || attempt > 0 || h.User == nil || !errors.Is(err, syscall.EAGAIN) {
			return cmd, ptmx, err
		}
		if kerr := h.killAll(); kerr != nil {
			return cmd, nil, errors.Join(err, kerr)
		}
	}
}

// killAll kills every process of the sandbox user after it ran out of processes.
func (h *Handler) killAll() error {
	n, err := h.User.KillAll()
	if err == nil && h.Log != nil {
		h.Log.Warn("pids limit reached: killed every process of the sandbox user", "killed", n)
	}
	return err
}

// isResize applies data as a resize message if it is one.
func isResize(data []byte, ptmx *os.File) bool {
	trimmed := strings.TrimSpace(string(data))
	if !strings.HasPrefix(trimmed, "{") {
		return false
	}
	var m shipapi.ResizeMessage
	if err := json.Unmarshal([]byte(trimmed), &m); err != nil || m.Type != "resize" {
		return false
	}
	if m.Cols > 0 && m.Rows > 0 {
		_ = pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(min(m.Cols, 1000)), Rows: uint16(min(m.Rows, 1000))})
	}
	return true
}

// Wait waits for all terminal sessions to end (after their sockets closed).
func (h *Handler) Wait() { h.wg.Wait() }

// killSession SIGKILLs every process whose session id is sid, by scanning
// /proc. Processes that left the session (setsid) are not ours to track.
func killSession(sid int) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for _, pid := range SessionPIDs(sid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// SessionPIDs lists the processes whose session id is sid.
func SessionPIDs(sid int) []int {
	var out []int
	privsep.EachProcess(func(pid int, dir string) {
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return
		}
		// Fields after the parenthesised command: state ppid pgrp session ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 || f[0] == "Z" { // a zombie is already dead, waiting to be reaped
			return
		}
		if got, err := strconv.Atoi(f[3]); err == nil && got == sid {
			out = append(out, pid)
		}
	})
	return out
}

// exitStatus is a finished shell's status as bash reports one: its exit code, or 128+N when
// signal N ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
