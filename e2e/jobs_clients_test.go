package e2e

// The clients of jobs against the real bay: the MCP tools of seed 002's workflow over bay's
// /mcp, and `shipyard job ...`.

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/internal/cli"
)

func TestJobClients(t *testing.T) {
	docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	t.Run("mcp", func(t *testing.T) {
		c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: b.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{apiKey}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		call := func(name string, args map[string]any, want ...string) string {
			t.Helper()
			args["sandbox_id"] = sb
			res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var text string
			for _, c := range res.Content {
				if tc, ok := c.(*mcpsdk.TextContent); ok {
					text += tc.Text
				}
			}
			if res.IsError {
				t.Fatalf("%s failed: %s", name, text)
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Fatalf("%s: %q lacks %q", name, text, w)
				}
			}
			return text
		}
		call("run_cmd", map[string]any{"command": "echo quick"}, "quick", "exit code: 0")
		text := call("run_cmd_async", map[string]any{"command": "for i in 1 2 3; do echo step$i; sleep 0.5; done"}, "Job started.")
		job := regexp.MustCompile(`job-[0-9a-f]{12}`).FindString(text)
		// task_watch from the offsets it returns, until the job ended: every line once.
		var all string
		offs := [2]int{}
		for i := 0; i < 30; i++ {
			text = call("task_watch", map[string]any{"job_id": job, "stdout_offset": offs[0], "stderr_offset": offs[1], "wait_seconds": 10})
			if m := regexp.MustCompile("(?s)\\*\\*stdout:\\*\\*\n```\n(.*?)\n```").FindStringSubmatch(text); m != nil {
				all += m[1]
			}
			offs[0], _ = strconv.Atoi(regexp.MustCompile(`next_stdout_offset:\*\* (\d+)`).FindStringSubmatch(text)[1])
			offs[1], _ = strconv.Atoi(regexp.MustCompile(`next_stderr_offset:\*\* (\d+)`).FindStringSubmatch(text)[1])
			if strings.Contains(text, "**Status:** succeeded") {
				break
			}
		}
		if strings.ReplaceAll(all, "\n", "") != "step1step2step3" {
			t.Fatalf("watched output %q (last: %s)", all, text)
		}
		call("task_status", map[string]any{"job_id": job}, "**Status:** succeeded", "**Exit code:** 0", "stdout 18 bytes")
		text = call("start_job", map[string]any{"kind": "python", "code": "import time\ntime.sleep(60)"}, "Job started.")
		py := regexp.MustCompile(`job-[0-9a-f]{12}`).FindString(text)
		call("cancel_job", map[string]any{"job_id": py}, "**Status:** cancelled")
	})

	t.Run("cli", func(t *testing.T) {
		run := func(want int, args ...string) (string, string) {
			t.Helper()
			var out, errOut bytes.Buffer
			code := cli.Run(ctx, append([]string{"--endpoint", b.URL, "--token", apiKey}, args...), strings.NewReader(""), &out, &errOut)
			if code != want {
				t.Fatalf("shipyard %v: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, want, out.String(), errOut.String())
			}
			return out.String(), errOut.String()
		}
		out, errOut := run(3, "job", "start", "-F", sb, "echo out; echo err >&2; exit 3")
		if out != "out\n" || !strings.Contains(errOut, "err\n") {
			t.Fatalf("job start -F: %q %q", out, errOut)
		}
		id, _ := run(0, "job", "start", sb, "--python", "print('from python')")
		id = strings.TrimSpace(id)
		out, _ = run(0, "job", "logs", "-f", sb, id)
		if out != "from python\n" {
			t.Fatalf("job logs -f: %q", out)
		}
		out, _ = run(0, "job", "logs", sb, id, "--stdout-offset", "5")
		if out != "python\n" {
			t.Fatalf("job logs from 5: %q", out)
		}
		out, _ = run(0, "job", "status", sb, id)
		if !strings.Contains(out, "succeeded, exit code 0") {
			t.Fatalf("job status: %q", out)
		}
		out, _ = run(0, "job", "ls", sb, "--status", "failed")
		if strings.Count(out, "\n") != 2 || !strings.Contains(out, "failed") {
			t.Fatalf("job ls: %q", out)
		}
		long, _ := run(0, "job", "start", sb, "sleep 60")
		out, _ = run(0, "job", "cancel", sb, strings.TrimSpace(long))
		if !strings.Contains(out, "cancelled") {
			t.Fatalf("job cancel: %q", out)
		}
		run(66, "job", "status", sb, "job-000000000000")
		out, errOut = run(5, "shell", "--stream", sb, "echo s1; echo e1 >&2; exit 5")
		if out != "s1\n" || errOut != "e1\n" {
			t.Fatalf("shell --stream: %q %q", out, errOut)
		}
		out, errOut = run(0, "python", "--stream", sb, "import sys\nprint('p1')\nprint('e2', file=sys.stderr)\n6 * 7")
		if out != "p1\n42\n" || errOut != "e2\n" {
			t.Fatalf("python --stream: %q %q", out, errOut)
		}
		out, errOut = run(1, "python", "--stream", sb, "print('before')\n1/0")
		if out != "before\n" || !strings.Contains(errOut, "ZeroDivisionError") {
			t.Fatalf("python --stream of a failing cell: %q %q", out, errOut)
		}
	})
}
