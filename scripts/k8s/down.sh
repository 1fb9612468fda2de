#!/usr/bin/env bash
# Stops what up.sh started and removes its state (make k8s-down): first every pod through the
# API (kubelet tears down their containers and network), then the processes, then whatever a
# process killed mid-way left: containerd's tasks, the bridge, the cgroups, $K8S_STATE.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"
export PATH="$PATH:/usr/sbin:/sbin"
S="$K8S_STATE"
[ -d "$S" ] || exit 0
alive() { [ -f "$S/pids/$1.pid" ] && kill -0 "$(cat "$S/pids/$1.pid")" 2>/dev/null; }
if alive kube-apiserver && alive node && [ -x "$S/bin/kubetool" ]; then
  "$S/bin/kubetool" drain -kubeconfig "$K8S_KUBECONFIG" -timeout 30s || echo "k8s-down: drain incomplete" >&2
fi
# Containers left behind (a drain cut short): kill and delete them while containerd runs.
if [ -S "$K8S_CONTAINERD_SOCK" ] && alive node; then
  c=(ctr -a "$K8S_CONTAINERD_SOCK" -n k8s.io)
  for id in $("${c[@]}" tasks ls -q 2>/dev/null); do "${c[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
  sleep 0.5
  for id in $("${c[@]}" tasks ls -q 2>/dev/null); do "${c[@]}" tasks delete -f "$id" >/dev/null 2>&1; done
  for id in $("${c[@]}" containers ls -q 2>/dev/null); do "${c[@]}" containers delete "$id" >/dev/null 2>&1; done
fi
for p in kube-proxy kube-router node localpv kube-scheduler kube-controller-manager kube-apiserver etcd; do
  [ -f "$S/pids/$p.pid" ] || continue
  pid="$(cat "$S/pids/$p.pid")"
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null
done
# containerd's shims run in sessions of their own: each wrote its pid in its task's bundle.
for f in "$K8S_RUN"/containerd/io.containerd.runtime.v2.task/*/*/shim.pid; do
  [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
done
ip link del "$K8S_BRIDGE" 2>/dev/null
# What the NetworkPolicy enforcer (kube-router, legacy iptables) leaves behind it: the jumps
# from the built-in chains, its chains (KUBE-ROUTER-*, a firewall chain per Pod, a chain per
# policy) and its ipsets. Its own --cleanup-config would also tear down the router's and the
# service proxy's state, which never ran here.
if command -v iptables-legacy >/dev/null; then
  for chain in INPUT FORWARD OUTPUT; do
    iptables-legacy -w -S "$chain" 2>/dev/null | grep -- "-j KUBE-ROUTER-" | sed 's/^-A /-D /' |
      while read -r rule; do eval "iptables-legacy -w $rule" 2>/dev/null; done
  done
  kr_chains="$(iptables-legacy -w -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-(ROUTER|POD-FW|NWPLCY)-/ {print $2}')"
  for c in $kr_chains; do iptables-legacy -w -F "$c" 2>/dev/null; done
  for c in $kr_chains; do iptables-legacy -w -X "$c" 2>/dev/null; done
fi
if command -v ipset >/dev/null; then
  for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-(SRC|DST)-'); do ipset destroy "$set" 2>/dev/null; done
fi
# The service proxy's tables (kube-proxy, nftables mode).
if command -v nft >/dev/null; then
  for fam in ip ip6; do nft delete table "$fam" kube-proxy 2>/dev/null; done
fi
for chain in DOCKER-USER FORWARD; do
  while iptables -D "$chain" -i "$K8S_BRIDGE" -o "$K8S_BRIDGE" -j ACCEPT 2>/dev/null; do :; done
done
# The last killed processes take a moment to leave their cgroups and the node's mount namespace
# (until then its mounts keep their mount points busy): retry for up to 10 s.
for _ in $(seq 1 50); do
  sleep 0.2
  for h in /sys/fs/cgroup/*/shipyard-k8s; do
    [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  # Mounts under the state directory made outside the node's namespace (the volumes' shared
  # mount and the volume files on it).
  grep -o " $S[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -rf "$S" "$K8S_RUN" 2>/dev/null
  left=0
  for h in /sys/fs/cgroup/*/shipyard-k8s; do [ -d "$h" ] && left=1; done
  [ -e "$S" ] || [ -e "$K8S_RUN" ] && left=1
  [ "$left" = 0 ] && break
done
[ "$left" = 0 ] || echo "k8s-down: $S or the cgroups shipyard-k8s could not be removed" >&2
echo "k8s-down: done" >&2
