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
if [ $left = 1 ]; then exit 1; fi
echo "no leftover containers, volumes or networks"
