package testenv

import "testing"

// ForkBombScript runs a fork bomb for five seconds, then counts the processes and prints
// "survived". Everything after the bomb's start is a bash builtin: no fork is needed to get
// there, so the last lines appear exactly when the sandbox kernel outlived the bomb. Its first
// line is the RLIMIT_NPROC it ran under (`ulimit -u`). The gVisor tests of both drivers run it
// as uid 1000 in a one-shot container.
const ForkBombScript = `ulimit -u
mkfifo /tmp/wait && exec 3<>/tmp/wait
:(){ :|:& }
: 2>/dev/null
read -t 5 -u 3
n=0; for p in /proc/[0-9]*; do n=$((n+1)); done
echo "processes $n"
echo survived`

// CheckUserCodeHoldsNothing asserts, through a sandbox's shell (sh) and python (py) calls
// that return their trimmed output, that user code runs as 1000:1000 without supplementary
// groups, with no capability and no-new-privileges, and that setuid(0) is refused: ship's
// privilege separation as every runtime and driver must keep it.
func CheckUserCodeHoldsNothing(t *testing.T, sh, py func(string) string) {
	t.Helper()
	if out := sh("id -u; id -g; id -G; grep -E '^Cap(Inh|Prm|Eff)' /proc/self/status"); out !=
		"1000\n1000\n1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000" {
		t.Errorf("shell's ids and capabilities: %q", out)
	}
	if out := py("import os, ctypes\nprint(os.getresuid(), os.getresgid(), ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))"); out != "(1000, 1000, 1000) (1000, 1000, 1000) 1" {
		t.Errorf("the kernel's ids and no-new-privileges: %q", out)
	}
	if out := py("import os\ntry:\n    os.setuid(0)\n    print('root')\nexcept PermissionError:\n    print('refused')"); out != "refused" {
		t.Errorf("setuid(0) from the kernel: %q", out)
	}
}
