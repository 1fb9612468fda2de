#!/usr/bin/env bash
# Copies images from the Docker engine into the node's containerd (namespace k8s.io): there is
# no registry, so pods run with imagePullPolicy Never on what was copied here. Without
# arguments: the pod sandbox image (built here from scripts/k8s/pause when the engine lacks it)
# and ship:latest, ship:base and gull:latest when the engine has them (`make images` builds
# them; the profiles name these tags). An image whose
# engine id was already copied is skipped.
# Usage: images.sh [IMAGE...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"
repo="$(cd "$here/../.." && pwd)"
export PATH="$PATH:/usr/local/go/bin"
S="$K8S_STATE"
mkdir -p "$S/images"

if ! docker image inspect "$K8S_PAUSE_IMAGE" >/dev/null 2>&1; then
  tmp="$(mktemp -d)"
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/pause" ./scripts/k8s/pause)
  tar -C "$tmp" -c pause | docker import -c 'ENTRYPOINT ["/pause"]' - "$K8S_PAUSE_IMAGE" >/dev/null
  rm -rf "$tmp"
fi
images=("$@")
if [ ${#images[@]} -eq 0 ]; then
  images=("$K8S_PAUSE_IMAGE")
  for ref in ship:latest ship:base gull:latest; do
    docker image inspect "$ref" >/dev/null 2>&1 && images+=("$ref")
  done
fi
todo=()
for ref in "${images[@]}"; do
  id="$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null)" || continue # removed meanwhile
  stamp="$S/images/$(echo "$ref" | tr '/:' '__')"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$id" ] && continue
  todo+=("$ref")
done
[ ${#todo[@]} -eq 0 ] && exit 0
t0=$(date +%s)
docker save "${todo[@]}" | ctr -a "$K8S_CONTAINERD_SOCK" -n k8s.io images import - >/dev/null
for ref in "${todo[@]}"; do
  docker image inspect -f '{{.Id}}' "$ref" >"$S/images/$(echo "$ref" | tr '/:' '__')"
done
echo "k8s images: copied ${todo[*]} in $(( $(date +%s) - t0 )) s" >&2
