// Package shiptest holds helpers shared by the ship test suites.
package shiptest

import (
	"os"
	"os/exec"
	"sync"
	"testing"
)

var (
	pyOnce sync.Once
	pyErr  string
	pyPath string
)

// Python returns the interpreter the tests run kernels with: $SHIP_TEST_PYTHON,
// default /usr/bin/python3 (the python3 first on PATH in CI is a pyenv build
// without Debian's python3-ipykernel). A missing ipykernel or matplotlib fails
// the test: CI installs them, so their absence is a broken setup, not a skip.
func Python(t testing.TB) string {
	t.Helper()
	pyOnce.Do(func() {
		pyPath = os.Getenv("SHIP_TEST_PYTHON")
		if pyPath == "" {
			pyPath = "/usr/bin/python3"
		}
		out, err := exec.Command(pyPath, "-c", "import ipykernel, matplotlib").CombinedOutput()
		if err != nil {
			pyErr = "python " + pyPath + " cannot import ipykernel and matplotlib (" + err.Error() + "): " + string(out) +
				"\ninstall them (apt-get install -y python3-ipykernel python3-matplotlib) or set SHIP_TEST_PYTHON"
		}
	})
	if pyErr != "" {
		t.Fatal(pyErr)
	}
	return pyPath
}
