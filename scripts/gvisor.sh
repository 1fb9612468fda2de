#!/usr/bin/env bash
# Makes gVisor's runsc available to the Docker engine as the runtime "runsc" (a profile's
# `runtime: runsc`, docs/gvisor.md), idempotently:
#   1. builds runsc from source through the Go module proxy (the gvisor.dev/gvisor module's
#      `go` branch, pinned below) into /var/cache/shipyard/gvisor/<version>/runsc unless it is
#      there (measured here: about 120 CPU-seconds and 750 MB of memory with an empty Go build
#      cache, 70 with a warm one; the binary is reproducible; then nothing), and next to it
#      gVisor's containerd shim, containerd-shim-runsc-v1, from the same module (the test
#      cluster's runtime handler runsc, scripts/k8s/up.sh);
#   2. adds it to /etc/docker/daemon.json's "runtimes" (with the systrap platform: no KVM
#      needed) unless it is there with that path and those arguments, keeping every other key
#      and a copy of the previous file (daemon.json.shipyard-bak);
#   3. only then (or when the engine does not list runsc yet) makes the engine reload its
#      configuration with SIGHUP, which reloads its runtimes without restarting it: running
#      containers are not touched;
#   4. waits until `docker info` lists runsc, and fails otherwise.
# `gvisor.sh build` does step 1 only and prints the directory of both binaries on stdout.
# Debian's runsc package (2022, ptrace platform only) is not used: it cannot start containers
# on Docker 28 and is much slower where it can. .ci/run calls this script: tests under runsc
# run in CI, and a machine where it cannot be made available fails the run.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

GVISOR_VERSION="${GVISOR_VERSION:-v0.0.0-20260527191743-a81fd9dd382e}"
CACHE="${SHIPYARD_CACHE:-/var/cache/shipyard}/gvisor/$GVISOR_VERSION"
RUNSC="$CACHE/runsc"
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
PLATFORM="${GVISOR_PLATFORM:-systrap}"

mkdir -p "$CACHE"
# One run at a time on a machine (two CI runs, or a developer next to CI).
exec 9>"$CACHE/.lock"
flock 9

if [ ! -x "$RUNSC" ]; then
  echo "gvisor: building runsc $GVISOR_VERSION (a few minutes the first time)" >&2
  tmp="$(mktemp -d "$CACHE/.build-XXXXXX")"
  GOBIN="$tmp" CGO_ENABLED=0 nice go install "gvisor.dev/gvisor/runsc@$GVISOR_VERSION"
  mv "$tmp/runsc" "$RUNSC"
  rmdir "$tmp"
fi
# gVisor's containerd shim sets its own oom_score_adj to -999 and gives up when it may not:
# lowering it needs CAP_SYS_RESOURCE, which this project's machines do not grant (their
# containerd runs with restrict_oom_score_adj for the same reason). It is built from a copy of
# the pinned module in which that one refusal is passed over (silently: what the shim prints
# while it starts is its answer to containerd); anything else is upstream's.
if [ ! -x "$CACHE/containerd-shim-runsc-v1" ]; then
  echo "gvisor: building containerd-shim-runsc-v1 $GVISOR_VERSION (a few minutes the first time)" >&2
  mod="$(go mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  rm -rf "$CACHE"/.src-* # an interrupted build's
  src="$(mktemp -d "$CACHE/.src-XXXXXX")"
  cp -r "$mod/." "$src"
  chmod -R u+w "$src"
  python3 - "$src/pkg/shim/v1/manager.go" <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
old = """	if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {
		return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)
	}
"""
new = """	if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil && !errors.Is(err, os.ErrPermission) {
		return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)
	}
"""
imp = 'import (\n\t"context"\n'
if s.count(old) != 1 or s.count(imp) != 1:
    sys.exit("gvisor: the shim's OOM score code is not the one patched here: review the patch for " + path)
open(path, "w").write(s.replace(old, new).replace(imp, imp + '\t"errors"\n'))
PY
  (cd "$src" && CGO_ENABLED=0 nice go build -trimpath -o "$CACHE/.containerd-shim-runsc-v1.part" ./shim)
  mv "$CACHE/.containerd-shim-runsc-v1.part" "$CACHE/containerd-shim-runsc-v1"
  rm -rf "$src"
fi
"$RUNSC" --version >/dev/null
if [ "${1:-}" = build ]; then
  echo "$CACHE"
  exit 0
fi

mkdir -p "$(dirname "$DAEMON_JSON")"
changed="$(python3 - "$DAEMON_JSON" "$RUNSC" "$PLATFORM" <<'PY'
import json, os, shutil, sys
path, runsc, platform = sys.argv[1:4]
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read().strip()
    cfg = json.loads(text) if text else {}
want = {"path": runsc, "runtimeArgs": ["--platform=" + platform]}
runtimes = cfg.setdefault("runtimes", {})
if runtimes.get("runsc") == want:
    print("no")
    sys.exit(0)
runtimes["runsc"] = want
if os.path.exists(path):
    shutil.copy2(path, path + ".shipyard-bak")
tmp = path + ".shipyard-tmp"
with open(tmp, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
print("yes")
PY
)"

listed() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }
# Reload when the file changed, or when the engine has not read it since (registered by hand,
# or an earlier run's reload failed).
if [ "$changed" = yes ] || ! listed; then
  pid="$(pidof dockerd || true)"
  if [ -z "$pid" ]; then
    echo "gvisor: dockerd is not running here; runsc is registered for its next start" >&2
    exit 0
  fi
  echo "gvisor: $RUNSC is the runtime runsc in $DAEMON_JSON; reloading the engine (SIGHUP)" >&2
  kill -HUP $pid
fi
for _ in $(seq 1 30); do
  listed && exit 0
  sleep 1
done
echo "gvisor: the engine does not list the runtime runsc (see $DAEMON_JSON and the engine's log)" >&2
exit 1
