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
  # A complete spare (.spare/<size>-<id>.img mounted on its .d, formatted ahead of time) is a
  # cache, not a leftover: a bay that was killed leaves its spares for the next bay to take, and
  # the refill keeps at most two of a size. A spare's mount without its file is a leftover.
  mounts=$(awk -v d="$cargos/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo |
    while read -r m; do
      case "$m" in "$cargos/.spare/"*.d) [ -f "${m%.d}.img" ] && continue ;; esac
      echo "$m"
    done | head -20)
  if [ -n "$files$mounts" ]; then
    echo "leftover cargo files or mounts in $cargos:" $files $mounts >&2
    left=1
  fi
fi
# Name files of sandboxes under gVisor: a directory per instance, removed with it.
names=${SHIPYARD_NAMES_DIR:-/var/lib/shipyard/names}
if [ -d "$names" ]; then
  dirs=$(find "$names" -mindepth 1 -maxdepth 1 | head -20)
  if [ -n "$dirs" ]; then
    echo "leftover name files in $names:" $dirs >&2
    left=1
  fi
fi
# The Kubernetes test cluster (scripts/k8s/test.sh stops it after the tests): no state, no
# process it recorded, no bridge, no cgroup of its own.
. "$(dirname "$0")/k8s/env.sh"
k8s=""
[ -d "$K8S_STATE" ] && k8s+=" $K8S_STATE"
[ -d "$K8S_RUN" ] && k8s+=" $K8S_RUN"
ip link show "$K8S_BRIDGE" >/dev/null 2>&1 && k8s+=" bridge $K8S_BRIDGE"
for h in /sys/fs/cgroup/*/shipyard-k8s /sys/fs/cgroup/shipyard-k8s; do [ -d "$h" ] && k8s+=" $h"; done
iptables -S 2>/dev/null | grep -q -- "-i $K8S_BRIDGE -o $K8S_BRIDGE -j ACCEPT" && k8s+=" iptables rule for $K8S_BRIDGE"
iptables-legacy -S 2>/dev/null | grep -q -- "-N KUBE-ROUTER-" && k8s+=" kube-router's iptables chains"
nft list table ip kube-proxy >/dev/null 2>&1 && k8s+=" kube-proxy's nftables table"
if [ -n "$k8s" ]; then
  echo "the Kubernetes test cluster is left behind:$k8s (make k8s-down)" >&2
  left=1
fi
if [ $left = 1 ]; then exit 1; fi
echo "no leftover containers, volumes, networks, cargo files, name files or test cluster"
