#!/usr/bin/env bash
# Fails when the tests left a bay-managed or test container, volume or network behind.
set -euo pipefail
left=0
for kind in container volume network; do
  for label in bay.managed shipyard.test; do
    case $kind in
      container) ids=$(docker ps -aq --filter "label=$label") ;;
      volume) ids=$(docker volume ls -q --filter "label=$label") ;;
      network) ids=$(docker network ls -q --filter "label=$label") ;;
    esac
    if [ -n "$ids" ]; then
      echo "leftover ${kind}s with label $label:" $ids >&2
      left=1
    fi
  done
done
# Bounded cargos: a loop-mounted file per cargo volume; every one must have gone with its volume.
cargos=${SHIPYARD_CARGO_DIR:-/var/lib/shipyard/cargos}
if [ -d "$cargos" ]; then
  files=$(find "$cargos" -maxdepth 1 -name '*.img' | head -20)
  mounts=$(awk -v d="$cargos/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | head -20)
  if [ -n "$files$mounts" ]; then
    echo "leftover cargo files or mounts in $cargos:" $files $mounts >&2
    left=1
  fi
fi
if [ $left = 1 ]; then exit 1; fi
echo "no leftover containers, volumes, networks or cargo files"
