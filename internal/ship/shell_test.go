package ship_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// procsWithArg lists pids whose command line contains arg.
func procsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && strings.HasPrefix(string(st)[i+1:], " Z") {
			continue // zombie
		}
		if strings.HasPrefix(arg, "sleep ") && !strings.HasPrefix(string(b), "sleep\x00") {
			continue // only the sleep processes themselves, not a shell naming them
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), arg) {
			out = append(out, pid)
		}
	}
	return out
}

func TestShellExec(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(filepath.Join(d.workspace, "sub"), 0o755)
	st, b := d.post(t, "/shell/exec", map[string]any{
		"command": "echo out; echo err >&2; pwd; echo $HOME $SHELL $FOO $SHIP_TEST_PROFILE_VAR; read x; echo read=$?",
		"cwd":     "sub",
		"env":     map[string]string{"FOO": "bar"},
	})
	want := "out\n" + d.workspace + "/sub\n" + d.workspace + " /bin/bash bar from-container-env\nread=1\n"
	if st != 200 || b["success"] != true || b["return_code"].(float64) != 0 || b["stdout"] != want || b["stderr"] != "err\n" || b["pid"] == nil {
		t.Fatalf("exec %d %v", st, b)
	}
	st, b = d.post(t, "/shell/exec", map[string]any{"command": "exit 3"})
	if st != 200 || b["success"] != false || b["return_code"].(float64) != 3 {
		t.Fatalf("exit code %d %v", st, b)
	}
	st, b = d.post(t, "/shell/exec", map[string]any{"command": "printf '%s' 'a b' \"c\"", "shell": false})
	if st != 200 || b["stdout"] != "a bc" {
		t.Fatalf("shell=false %d %v", st, b)
	}
	// A cwd that is not a directory inside the workspace is a client mistake, as a path of the
	// file API is: lexically outside, through a symlink leading outside, missing, or a file.
	os.Symlink("/etc", filepath.Join(d.workspace, "etc-link"))
	os.WriteFile(filepath.Join(d.workspace, "plain.txt"), []byte("x"), 0o644)
	for cwd, want := range map[string]struct {
		status int
		code   string
	}{
		"../": {403, shipapi.CodeAccessDenied}, "/etc": {403, shipapi.CodeAccessDenied},
		"etc-link": {403, shipapi.CodeAccessDenied}, "etc-link/ssl": {403, shipapi.CodeAccessDenied},
		"missing": {404, shipapi.CodeNotFound}, "plain.txt": {400, shipapi.CodeNotDirectory},
		strings.Repeat("n", 256): {400, shipapi.CodeInvalidPath},
	} {
		st, b = d.post(t, "/shell/exec", map[string]any{"command": "pwd", "cwd": cwd})
		if st != want.status || b["code"] != want.code || !strings.HasPrefix(b["detail"].(string), "cwd: ") {
			t.Fatalf("cwd %q: %d %v, want %d %s", cwd, st, b, want.status, want.code)
		}
	}
	// Output beyond the cap is dropped and flagged.
	st, b = d.post(t, "/shell/exec", map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' x; echo done >&2"})
	if st != 200 || len(b["stdout"].(string)) != 64<<10 || b["stdout_truncated"] != true || b["stderr"] != "done\n" || b["stderr_truncated"] != nil {
		t.Fatalf("cap %d len %d %v %v", st, len(b["stdout"].(string)), b["stdout_truncated"], b["stderr"])
	}
}

func TestShellTimeoutKillsGrandchildren(t *testing.T) {
	d := newDaemon(t)
	t0 := time.Now()
	st, b := d.post(t, "/shell/exec", map[string]any{"command": "echo started; sleep 100.4242 & sleep 100.4243", "timeout": 1})
	if el := time.Since(t0); el > 5*time.Second {
		t.Fatalf("timeout took %s", el)
	}
	if st != 200 || b["success"] != false || b["return_code"].(float64) != -1 || b["timed_out"] != true ||
		!strings.Contains(b["error"].(string), "timed out") || b["stdout"] != "started\n" {
		t.Fatalf("timeout %d %v", st, b)
	}
	poll(t, 5*time.Second, "sleep processes to die", func() bool {
		return len(procsWithArg("100.4242")) == 0 && len(procsWithArg("100.4243")) == 0
	})
}

func TestBackgroundProcess(t *testing.T) {
	d := newDaemon(t)
	st, b := d.post(t, "/shell/exec", map[string]any{"command": "echo first; sleep 0.2; echo second; exit 4", "background": true})
	if st != 200 || b["success"] != true || len(b["process_id"].(string)) != 8 || b["pid"] == nil {
		t.Fatalf("start %d %v", st, b)
	}
	id := b["process_id"].(string)
	var info map[string]any
	poll(t, 10*time.Second, "background process to finish", func() bool {
		_, info = d.call(t, "GET", "/shell/processes/"+id, nil)
		return info["status"] != "running"
	})
	if info["status"] != "failed" || info["return_code"].(float64) != 4 || info["stdout"] != "first\nsecond\n" || info["finished_at"] == nil {
		t.Fatalf("finished %v", info)
	}

	_, b = d.post(t, "/shell/exec", map[string]any{"command": "sleep 100.5151 & sleep 100.5152", "background": true})
	id2 := b["process_id"].(string)
	_, list := d.call(t, "GET", "/shell/processes", nil)
	found := 0
	for _, p := range list["processes"].([]any) {
		pid := p.(map[string]any)["process_id"]
		if pid == id || pid == id2 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("list %v", list)
	}
	// Both sleeps run (bash may or may not exec the last one: match on argv[0]).
	poll(t, 5*time.Second, "sleeps to start", func() bool {
		return len(procsWithArg("sleep 100.5151")) >= 1 && len(procsWithArg("sleep 100.5152")) >= 1
	})
	st, info = d.post(t, "/shell/processes/"+id2+"/kill", nil)
	if st != 200 || info["status"] != "killed" {
		t.Fatalf("kill %d %v", st, info)
	}
	poll(t, 5*time.Second, "killed group to die", func() bool {
		return len(procsWithArg("100.5151")) == 0 && len(procsWithArg("100.5152")) == 0
	})
	st, b = d.call(t, "GET", "/shell/processes/nosuchid", nil)
	expect(t, st, b, 404, "not_found")
	st, b = d.post(t, "/shell/processes/nosuchid/kill", nil)
	expect(t, st, b, 404, "not_found")
}
