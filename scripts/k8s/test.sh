#!/usr/bin/env bash
# Runs the Kubernetes tests (`go test -tags k8s` on the packages given, default the driver's)
# against the test cluster, which it builds when needed (build.sh, cached), starts (up.sh 2: the
# API server for the object tests and the node for the conformance suite) and always stops
# after (down.sh), also when the tests fail or the run is interrupted. A cluster that was
# already running when it started (someone's `make k8s-up`) is used and left running.
# Prints how long each phase took. The exit status is the tests' (or the first failing phase's).
#
# Usage: test.sh [PKG...]    (TEST_TIMEOUT bounds go test, default 45m; GO the go command)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"
repo="$(cd "$here/../.." && pwd)"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
GO="${GO:-go}"
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./internal/bay/k8s/...)
say() { echo "test-k8s: $*" >&2; }
now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{printf "%.1f", $1-$2}'; }

# One test cluster per machine: a second run (another checkout's) waits for the first to end
# instead of tearing down the cluster under it.
exec 8>/run/lock/shipyard-k8s-test.lock
flock 8

alive() { [ -f "$K8S_STATE/pids/$1.pid" ] && kill -0 "$(cat "$K8S_STATE/pids/$1.pid")" 2>/dev/null; }
started=0
if ! alive kube-apiserver; then started=1; fi
finish() {
  local status=$?
  trap - EXIT INT TERM
  if [ "$started" = 1 ]; then
    local t=$(now)
    "$here/down.sh"
    say "cluster stopped in $(since "$t") s"
  else
    say "the cluster was running before this run: left running (make k8s-down stops it)"
  fi
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

t=$(now)
bindir="$("$here/build.sh")" || { say "building the kube binaries failed"; exit 1; }
say "kube binaries ready in $(since "$t") s ($bindir)"
"$here/install-deps.sh" || exit 1
t=$(now)
K8S_BINDIR="$bindir" "$here/up.sh" 2 || { say "the cluster did not come up"; exit 1; }
say "cluster up in $(since "$t") s"
t=$(now)
cd "$repo"
"$GO" test -tags k8s -count=1 -timeout "${TEST_TIMEOUT:-45m}" "${pkgs[@]}"
status=$?
say "go test -tags k8s ${pkgs[*]}: status $status in $(since "$t") s"
exit "$status"
