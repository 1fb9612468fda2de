package ship_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

func (d *daemon) py(t *testing.T, code string, timeout int) (int, map[string]any) {
	t.Helper()
	return d.post(t, "/ipython/exec", map[string]any{"code": code, "timeout": timeout})
}

func text(b map[string]any) string {
	o, _ := b["output"].(map[string]any)
	s, _ := o["text"].(string)
	return s
}

func TestPythonExec(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "x = 41\nprint('hello')\nx + 1", 30)
	if st != 200 || b["success"] != true || text(b) != "hello\n42" || b["execution_count"] == nil || b["error"] != nil {
		t.Fatalf("exec %d %v", st, b)
	}
	// State persists; the kernel runs in the workspace with the container env.
	st, b = d.py(t, "import os\nprint(x, os.getcwd(), os.environ['SHIP_TEST_PROFILE_VAR'], os.environ['MPLBACKEND'], os.environ['PYDEVD_DISABLE_FILE_VALIDATION'])", 30)
	if st != 200 || text(b) != "41 "+d.workspace+" from-container-env module://matplotlib_inline.backend_inline 1" {
		t.Fatalf("state %d %q", st, text(b))
	}
	st, b = d.py(t, "def f():\n    return 1/0\nf()", 30)
	errText, _ := b["error"].(string)
	if st != 200 || b["success"] != false || !strings.Contains(errText, "ZeroDivisionError") ||
		!strings.Contains(errText, "return 1/0") || strings.Contains(errText, "\x1b[") {
		t.Fatalf("error %d %v", st, b)
	}
	// Display data and stderr stream.
	st, b = d.py(t, "import sys\nprint('warn', file=sys.stderr)\ndisplay('shown')", 30)
	if st != 200 || text(b) != "warn\n'shown'" {
		t.Fatalf("display %d %q", st, text(b))
	}
}

func TestPythonMatplotlibImage(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()", 60)
	if st != 200 || b["success"] != true {
		t.Fatalf("plot %d %v", st, b)
	}
	imgs := b["output"].(map[string]any)["images"].([]any)
	if len(imgs) != 1 {
		t.Fatalf("images %v", imgs)
	}
	png, err := base64.StdEncoding.DecodeString(imgs[0].(map[string]any)["image/png"].(string))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("not a PNG: %v", err)
	}
}

// TestPythonMatplotlibInline pins what the kernel's matplotlib setup (the
// inline backend chosen by MPLBACKEND, no init code at kernel start) must
// give: a figure left open at the end of a cell is shown as a PNG without
// plt.show(), and closed afterwards; savefig writes files; the settings of
// $MATPLOTLIBRC still apply; shell commands keep the rc file's Agg backend.
func TestPythonMatplotlibInline(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "import matplotlib\nprint(matplotlib.get_backend(), matplotlib.rcParams['savefig.dpi'], matplotlib.rcParams['axes.unicode_minus'])", 60)
	if st != 200 || b["success"] != true || text(b) != "module://matplotlib_inline.backend_inline 50.0 False" {
		t.Fatalf("backend and rc %d %v", st, b)
	}
	st, b = d.py(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2]);", 60)
	if st != 200 || b["success"] != true || len(images(t, b)) != 1 {
		t.Fatalf("figure without show: %d %v", st, b)
	}
	st, b = d.py(t, "len(plt.get_fignums())", 30)
	if st != 200 || text(b) != "0" || len(images(t, b)) != 0 {
		t.Fatalf("figures not closed after the cell: %d %v", st, b)
	}
	st, b = d.py(t, "fig = plt.figure()\nplt.plot([1, 2])\nfig.savefig('inline-saved.png')\nplt.close(fig)", 60)
	if st != 200 || b["success"] != true || len(images(t, b)) != 0 {
		t.Fatalf("savefig %d %v", st, b)
	}
	saved, err := os.ReadFile(filepath.Join(d.workspace, "inline-saved.png"))
	if err != nil || !strings.HasPrefix(string(saved), "\x89PNG") {
		t.Fatalf("saved figure: %v", err)
	}
	os.Remove(filepath.Join(d.workspace, "inline-saved.png"))
	st, b = d.post(t, "/shell/exec", map[string]any{"command": shiptest.Python(t) + " -c 'import matplotlib; print(matplotlib.get_backend())'"})
	if st != 200 || b["stdout"] != "agg\n" {
		t.Fatalf("shell backend %d %v", st, b)
	}
}

// TestPythonNoIPythonFilesInWorkspace: HOME is the workspace, yet the kernel
// leaves no .ipython (history database, profile) there; execution_count,
// _ and Out still work without the history database.
func TestPythonNoIPythonFilesInWorkspace(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "import os\nos.path.expanduser('~')", 30)
	if st != 200 || text(b) != "'"+d.workspace+"'" {
		t.Fatalf("kernel HOME %d %v", st, b)
	}
	first, _ := b["execution_count"].(float64)
	st, b = d.py(t, "_ + '/x'", 30)
	if st != 200 || text(b) != "'"+d.workspace+"/x'" || b["execution_count"] != first+1 {
		t.Fatalf("_ and execution_count after %v: %d %v", first, st, b)
	}
	st, b = d.py(t, fmt.Sprintf("Out[%d] == _", int(first)+1), 30)
	if st != 200 || text(b) != "True" || b["execution_count"] != first+2 {
		t.Fatalf("Out %d %v", st, b)
	}
	filepath.WalkDir(d.workspace, func(p string, e fs.DirEntry, err error) error {
		if err == nil && (e.Name() == ".ipython" || strings.HasPrefix(e.Name(), "history.sqlite")) {
			t.Errorf("IPython file in the workspace: %s", p)
		}
		return nil
	})
}

// images decodes output.images and checks each is a PNG.
func images(t *testing.T, b map[string]any) [][]byte {
	t.Helper()
	o, _ := b["output"].(map[string]any)
	list, _ := o["images"].([]any)
	var out [][]byte
	for _, im := range list {
		png, err := base64.StdEncoding.DecodeString(im.(map[string]any)["image/png"].(string))
		if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Fatalf("not a PNG: %v", err)
		}
		out = append(out, png)
	}
	return out
}

func TestPythonTimeoutKeepsState(t *testing.T) {
	d := newDaemon(t)
	d.py(t, "y = 1", 30)
	t0 := time.Now()
	st, b := d.py(t, "import time\nprint('before')\ntime.sleep(30)\nprint('after')", 1)
	if st != 200 || b["success"] != false || b["timed_out"] != true || b["error"] != "Code execution timed out after 1 seconds" {
		t.Fatalf("timeout %d %v", st, b)
	}
	if el := time.Since(t0); el > 10*time.Second {
		t.Fatalf("timeout took %s", el)
	}
	if text(b) != "before" {
		t.Fatalf("partial output %q", text(b))
	}
	// State kept, and nothing of the interrupted cell leaks into the next one.
	st, b = d.py(t, "print(y)", 30)
	if st != 200 || b["success"] != true || text(b) != "1" {
		t.Fatalf("after timeout %d %v", st, b)
	}
}

func TestPythonOutputsDoNotLeak(t *testing.T) {
	d := newDaemon(t)
	for i := range 5 {
		want := strings.Repeat("z", i+1)
		st, b := d.py(t, "print('"+want+"')", 30)
		if st != 200 || text(b) != want {
			t.Fatalf("call %d: %d %q", i, st, text(b))
		}
	}
}

func TestKernelDeathAndRestart(t *testing.T) {
	d := newDaemon(t)
	d.py(t, "z = 5", 30)
	_, before := d.call(t, "GET", "/ipython/kernel/status", nil)
	st, b := d.py(t, "import os\nos._exit(1)", 30)
	expect(t, st, b, 500, shipapi.CodeKernelDied)
	if !strings.Contains(b["detail"].(string), "restarted") {
		t.Fatalf("detail %q", b["detail"])
	}
	// The next call waits for the new kernel; its state is fresh.
	st, b = d.py(t, "print('z' in globals())", 60)
	if st != 200 || text(b) != "False" {
		t.Fatalf("after death %d %v", st, b)
	}
	_, after := d.call(t, "GET", "/ipython/kernel/status", nil)
	if after["status"] != "alive" || after["restarts"].(float64) <= before["restarts"].(float64) || after["pid"] == before["pid"] {
		t.Fatalf("status before %v after %v", before, after)
	}

	d.py(t, "w = 7", 30)
	st, b = d.post(t, "/ipython/kernel/restart", map[string]any{})
	if st != 200 || b["success"] != true {
		t.Fatalf("restart %d %v", st, b)
	}
	st, b = d.py(t, "print('w' in globals())", 60)
	if st != 200 || text(b) != "False" {
		t.Fatalf("after restart %d %v", st, b)
	}
}

// TestPythonCellIgnoringInterrupt: a cell that ignores SIGINT outlives its timeout; ship
// restarts the kernel, and both that answer and the next one say the state is lost.
func TestPythonCellIgnoringInterrupt(t *testing.T) {
	d := newDaemon(t)
	d.py(t, "keep = 1", 30)
	st, b := d.py(t, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", 1)
	if st != 200 || b["success"] != false || b["timed_out"] != true || b["kernel_restarted"] != true ||
		!strings.Contains(b["kernel_notice"].(string), "state") || !strings.Contains(b["error"].(string), "restarted") {
		t.Fatalf("timeout of a cell ignoring SIGINT: %d %v", st, b)
	}
	st, b = d.py(t, "print(keep)", 60)
	if st != 200 || b["kernel_restarted"] != true || !strings.Contains(b["kernel_notice"].(string), "did not stop when interrupted") ||
		!strings.Contains(b["error"].(string), "NameError") {
		t.Fatalf("next call does not say the kernel was restarted: %d %v", st, b)
	}
	st, b = d.py(t, "print(2)", 30)
	if st != 200 || b["kernel_restarted"] != nil || b["kernel_notice"] != nil || text(b) != "2" {
		t.Fatalf("the notice is given once more than needed: %d %v", st, b)
	}
}

// TestPythonKernelDeathIsReportedNext: a kernel that dies between calls (killed from outside)
// is restarted by ship, and the next call is told that its state is gone.
func TestPythonKernelDeathIsReportedNext(t *testing.T) {
	d := newDaemon(t)
	d.py(t, "keep = 1", 30)
	_, st := d.call(t, "GET", "/ipython/kernel/status", nil)
	pid := int(st["pid"].(float64))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "kernel restarted", func() bool {
		_, st := d.call(t, "GET", "/ipython/kernel/status", nil)
		return st["status"] == "alive" && int(st["pid"].(float64)) != pid
	})
	_, b := d.py(t, "print('keep' in globals())", 60)
	if text(b) != "False" || b["kernel_restarted"] != true || !strings.Contains(b["kernel_notice"].(string), "died") {
		t.Fatalf("next call after the kernel died: %v", b)
	}
}

// TestPythonOutputCap: text output beyond ship's limit (1 MiB) is dropped and flagged.
func TestPythonOutputCap(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "print('é' * (1 << 20))", 60)
	if st != 200 || b["text_truncated"] != true || len(text(b)) > 1<<20 || len(text(b)) < 1<<19 || !utf8.ValidString(text(b)) {
		t.Fatalf("capped output: %d %d bytes, truncated=%v", st, len(text(b)), b["text_truncated"])
	}
	st, b = d.py(t, "print('short')", 30)
	if st != 200 || b["text_truncated"] != nil {
		t.Fatalf("uncapped output flagged: %v", b)
	}
}

// TestPythonFigureAfterError: an Agg figure shown with display() is a PNG image even after an
// earlier cell raised.
func TestPythonFigureAfterError(t *testing.T) {
	d := newDaemon(t)
	if st, b := d.post(t, "/ipython/kernel/restart", map[string]any{}); st != 200 {
		t.Fatalf("restart %d %v", st, b)
	}
	if _, b := d.py(t, "1/0", 30); b["success"] != false {
		t.Fatalf("1/0: %v", b)
	}
	st, b := d.py(t, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3])\ndisplay(fig)", 60)
	if st != 200 || b["success"] != true {
		t.Fatalf("figure %d %v", st, b)
	}
	if imgs := images(t, b); len(imgs) != 1 || !bytes.HasPrefix(imgs[0], []byte("\x89PNG")) {
		t.Fatalf("figure after an error: %d images, text %q", len(imgs), text(b))
	}
	// The formatter is registered without importing matplotlib in the kernel.
	d.post(t, "/ipython/kernel/restart", map[string]any{})
	if _, b := d.py(t, "import sys\nprint('matplotlib' in sys.modules)", 30); text(b) != "False" {
		t.Fatalf("a fresh kernel imported matplotlib: %v", b)
	}
}
