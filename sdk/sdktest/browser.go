package sdktest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// BrowserResult is what a browser func returns for one command.
type BrowserResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// FakePageTitle is the title "get title" answers by default.
const FakePageTitle = "Fake Page"

// TinyPNG returns the bytes of the 1x1 PNG the default "screenshot" writes.
func TinyPNG() []byte {
	b, _ := base64.StdEncoding.DecodeString(tinyPNG)
	return b
}

// splitWords splits a command line into words with POSIX quoting (single quotes, double
// quotes with backslash escapes, backslash outside quotes), as bay does before running a
// browser command; no shell runs.
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`\n", line[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// defaultBrowser: a command containing "fail" exits 1 with a stderr line; "open URL" answers
// "✓ URL"; "get title" answers FakePageTitle; "screenshot [PATH] [--full]" stores a tiny
// PNG at PATH of the sandbox's workspace (default screenshots/shot.png) and answers
// "Screenshot saved to /workspace/PATH"; any other command answers "✓ Done".
func (s *Server) defaultBrowser(sandboxID, cmd string) BrowserResult {
	if strings.Contains(cmd, "fail") {
		return BrowserResult{Stderr: "✗ fake failure: " + cmd + "\n", ExitCode: 1}
	}
	words, err := splitWords(cmd)
	if err != nil || len(words) == 0 {
		return BrowserResult{Stderr: fmt.Sprintf("✗ cannot parse command %q\n", cmd), ExitCode: 1}
	}
	switch {
	case words[0] == "open" && len(words) == 2:
		return BrowserResult{Stdout: "✓ " + words[1] + "\n"}
	case words[0] == "get" && len(words) == 2 && words[1] == "title":
		return BrowserResult{Stdout: FakePageTitle + "\n"}
	case words[0] == "screenshot":
		p := ""
		for _, w := range words[1:] {
			if w == "--full" {
				continue
			}
			p = w
		}
		if p == "" {
			p = "screenshots/shot.png"
		}
		rel, err := sdk.ScreenshotPath(p)
		if err != nil {
			return BrowserResult{Stderr: "✗ path " + p + " is outside the workspace\n", ExitCode: 1}
		}
		s.PutFile(sandboxID, rel, TinyPNG())
		return BrowserResult{Stdout: "Screenshot saved to " + path.Join("/workspace", rel) + "\n"}
	}
	return BrowserResult{Stdout: "✓ Done\n"}
}

func (s *Server) runBrowser(sandboxID, cmd string) BrowserResult {
	s.mu.Lock()
	f := s.browserFunc
	s.mu.Unlock()
	if f == nil {
		f = s.defaultBrowser
	}
	return f(sandboxID, cmd)
}

// keepTrace marks the history row execID like bay does when it keeps a trace (learn or
// include_trace): payload_ref set, learn_status pending with learn. It returns the reference
// to answer with include_trace (nil otherwise). The fake stores no trace content.
func (s *Server) keepTrace(sb *sandbox, execID string, learn, include bool) *string {
	if !learn && !include {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	ref := fmt.Sprintf("blob:blob-%012d", s.seq)
	for i := range sb.history {
		if h := &sb.history[i]; h.ID == execID {
			h.PayloadRef, h.LearnEnabled = &ref, learn
			if learn {
				pending := "pending"
				h.LearnStatus = &pending
			}
		}
	}
	if !include {
		return nil
	}
	return &ref
}

func (s *Server) browserExec(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req bayapi.BrowserExecRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Cmd == nil {
		write422(w, r, []any{"body", "cmd"}, "Field required")
		return
	}
	if strings.TrimSpace(*req.Cmd) == "" || len(*req.Cmd) > gullapi.MaxCommandBytes {
		write422(w, r, []any{"body", "cmd"}, fmt.Sprintf("cmd must be a non-empty command of at most %d bytes", gullapi.MaxCommandBytes))
		return
	}
	if _, ok := checkTimeout(w, r, req.Timeout); !ok {
		return
	}
	if !s.checkCap(w, r, sb, bayapi.CapBrowser) {
		return
	}
	res := s.runBrowser(sb.resp.ID, *req.Cmd)
	out := bayapi.BrowserExecResponse{Success: res.ExitCode == 0, Output: res.Stdout, ExitCode: res.ExitCode, ExecutionTimeMS: 4}
	if res.Stderr != "" {
		e := res.Stderr
		out.Error = &e
	}
	out.ExecutionID = s.record(sb, bayapi.ExecBrowser, *req.Cmd, out.Success, res.Stdout, out.Error, req.Description, req.Tags)
	out.TraceRef = s.keepTrace(sb, out.ExecutionID, req.Learn, req.IncludeTrace)
	writeJSON(w, 200, out)
}

func (s *Server) browserBatch(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req bayapi.BrowserBatchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Commands) == 0 {
		write422(w, r, []any{"body", "commands"}, "List should have at least 1 item after validation, not 0")
		return
	}
	if len(req.Commands) > gullapi.MaxBatchCommands {
		write422(w, r, []any{"body", "commands"}, fmt.Sprintf("List should have at most %d items", gullapi.MaxBatchCommands))
		return
	}
	for i, c := range req.Commands {
		if strings.TrimSpace(c) == "" || len(c) > gullapi.MaxCommandBytes {
			write422(w, r, []any{"body", "commands", i}, fmt.Sprintf("command must be non-empty and at most %d bytes", gullapi.MaxCommandBytes))
			return
		}
	}
	if req.Timeout != nil && (*req.Timeout < 1 || *req.Timeout > sdk.MaxBrowserBatchTimeout) {
		write422(w, r, []any{"body", "timeout"}, fmt.Sprintf("Input should be between 1 and %d", sdk.MaxBrowserBatchTimeout))
		return
	}
	if !s.checkCap(w, r, sb, bayapi.CapBrowser) {
		return
	}
	stop := req.StopOnError == nil || *req.StopOnError
	out := bayapi.BrowserBatchResponse{Results: []bayapi.BrowserStep{}, TotalSteps: len(req.Commands), ExecutionTimeMS: 5}
	allOK := true
	var outs, errs []string
	for i, c := range req.Commands {
		res := s.runBrowser(sb.resp.ID, c)
		out.Results = append(out.Results, bayapi.BrowserStep{Cmd: c, Stdout: res.Stdout, Stderr: res.Stderr,
			ExitCode: res.ExitCode, StepIndex: i, DurationMS: 1})
		out.CompletedSteps++
		out.DurationMS++
		if o := strings.TrimSpace(res.Stdout); o != "" {
			outs = append(outs, o)
		}
		if e := strings.TrimSpace(res.Stderr); e != "" {
			errs = append(errs, e)
		}
		if res.ExitCode != 0 {
			allOK = false
			if stop {
				break
			}
		}
	}
	out.Success = allOK && out.CompletedSteps == out.TotalSteps
	var errStr *string
	if len(errs) > 0 {
		e := strings.Join(errs, "\n")
		errStr = &e
	}
	out.ExecutionID = s.record(sb, bayapi.ExecBrowserBatch, strings.Join(req.Commands, "\n"), out.Success,
		strings.Join(outs, "\n"), errStr, req.Description, req.Tags)
	out.TraceRef = s.keepTrace(sb, out.ExecutionID, req.Learn, req.IncludeTrace)
	writeJSON(w, 200, out)
}
