package e2e

import "testing"

// On the real runtime: a python cell and a shell command that run past their timeout come back
// as timed_out (the CLI's exit 124 for both), the shell's with exit code -1, and the kernel
// keeps its state after the interrupt.
func TestTimeoutsAreSaidSo(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{}, nil).Str("id")
	b.pythonOK(id, "kept = 7")
	r := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": "while True: pass", "timeout": 1}, nil), 200, "python past its timeout")
	if r.Get("timed_out") != true || r.Get("success") != false || r.Str("error") == "" {
		t.Errorf("python past its timeout: %s", r)
	}
	if got := b.pythonOK(id, "print(kept)"); got != "7" {
		t.Errorf("the kernel lost its state after the interrupt: %q", got)
	}
	r = expect(t, b.do("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "sleep 30", "timeout": 1}, nil), 200, "shell past its timeout")
	if r.Get("timed_out") != true || r.Get("exit_code") != float64(-1) || r.Get("success") != false {
		t.Errorf("shell past its timeout: %s", r)
	}
	r = expect(t, b.do("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "exit 3"}, nil), 200, "shell exit 3")
	if r.Get("timed_out") != nil || r.Get("exit_code") != float64(3) {
		t.Errorf("a command that ended by itself: %s", r)
	}
}
