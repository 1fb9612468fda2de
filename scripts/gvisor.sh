#!/usr/bin/env bash
# Makes gVisor's runsc available to the Docker engine as the runtime "runsc" (a profile's
# `runtime: runsc`), idempotently: builds runsc from source through the Go module proxy (the
# gvisor.dev/gvisor module's `go` branch, pinned below) into /var/cache/shipyard/gvisor/<version>
# unless it is there, adds it to /etc/docker/daemon.json's "runtimes" unless it is there with
# that path, and makes the engine reload its configuration (SIGHUP) only then.
#
# Debian's runsc package (2022) cannot start containers on Docker 28; this one can, with the
# systrap platform (no KVM needed). Not called by .ci/run: ship does not run under gVisor yet
# (docs/gvisor.md), so no profile may ask for it.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

GVISOR_VERSION="${GVISOR_VERSION:-v0.0.0-20260527191743-a81fd9dd382e}"
CACHE="${SHIPYARD_CACHE:-/var/cache/shipyard}/gvisor/$GVISOR_VERSION"
RUNSC="$CACHE/runsc"
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"

if [ ! -x "$RUNSC" ]; then
  echo "gvisor: building runsc $GVISOR_VERSION (a few minutes)" >&2
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build-XXXXXX")"
  GOBIN="$tmp" CGO_ENABLED=0 nice go install "gvisor.dev/gvisor/runsc@$GVISOR_VERSION"
  mv "$tmp/runsc" "$RUNSC"
  rmdir "$tmp"
fi
"$RUNSC" --version >/dev/null

changed="$(python3 - "$DAEMON_JSON" "$RUNSC" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read().strip()
    cfg = json.loads(text) if text else {}
want = {"path": runsc, "runtimeArgs": ["--platform=systrap"]}
runtimes = cfg.setdefault("runtimes", {})
if runtimes.get("runsc") == want:
    print("no")
    sys.exit(0)
runtimes["runsc"] = want
tmp = path + ".shipyard-tmp"
with open(tmp, "w") as f:
    json.dump(cfg, f)
os.replace(tmp, path)
print("yes")
PY
)"
if [ "$changed" = yes ]; then
  pid="$(pidof dockerd || true)"
  if [ -z "$pid" ]; then
    echo "gvisor: dockerd is not running here; runsc is registered for its next start" >&2
    exit 0
  fi
  kill -HUP $pid
fi
for _ in $(seq 1 30); do
  docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && exit 0
  sleep 1
done
echo "gvisor: the engine does not list the runtime runsc after a reload" >&2
exit 1
