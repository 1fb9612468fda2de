#!/usr/bin/env bash
# The node's processes (run by up.sh in a mount namespace of their own, propagation slave):
# containerd and kubelet share the namespace, so each sees the other's mounts, while the mounts
# below stay out of the host's. kubelet insists on setting a few kernel tunables at start
# (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...); on a machine shared with other
# work they must not change, so kubelet writes to copies bind-mounted over them here.
# Usage: node.sh BINDIR NODE_IP
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"
bindir="$1" node_ip="$2"
S="$K8S_STATE"
for f in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  [ -e "/proc/sys/$f" ] || continue
  copy="$S/sysctl/${f//\//.}"
  cat "/proc/sys/$f" >"$copy"
  mount --bind "$copy" "/proc/sys/$f"
done
PATH="$S/runtimes:$PATH" containerd --config "$S/containerd.toml" >"$S/logs/containerd.log" 2>&1 &
for _ in $(seq 1 200); do [ -S "$K8S_CONTAINERD_SOCK" ] && break; sleep 0.05; done
"$bindir/kubelet" --config="$S/kubelet.yaml" --kubeconfig="$S/kubelet.kubeconfig" \
  --root-dir="$S/kubelet" --cert-dir="$S/kubelet/pki" \
  --hostname-override="$K8S_NODE_NAME" --node-ip="$node_ip" >"$S/logs/kubelet.log" 2>&1 &
# Either one ending ends the node.
wait -n
echo "node.sh: containerd or kubelet exited" >&2
kill $(jobs -p) 2>/dev/null || true
wait
exit 1
