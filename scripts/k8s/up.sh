#!/usr/bin/env bash
# Starts the test machine's single-node Kubernetes (make k8s-up), idempotently:
#   tier 1: etcd (Debian's etcd-server) and kube-apiserver, controller-manager, scheduler;
#   tier 2 (default): also the node: a containerd of its own (own root, state and socket, CRI
#           plugin, overlayfs), the CNI bridge, kubelet, the localpv provisioner, the
#           NetworkPolicy enforcer (kube-router's firewall; K8S_NETPOL=none leaves it out), the
#           service proxy (kube-proxy, nftables mode; K8S_NO_KUBE_PROXY=1 leaves it out), and
#           the sandbox images copied from the Docker engine (there is no registry).
# Every process is started here in a session of its own, its pid in $K8S_STATE/pids; down.sh
# ends them and removes $K8S_STATE. The admin kubeconfig is $K8S_KUBECONFIG
# (/var/lib/shipyard-k8s/admin.kubeconfig). The kube binaries come from build.sh (cached).
#
# Usage: up.sh [1|2]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"
repo="$(cd "$here/../.." && pwd)"
tier="${1:-2}"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
t0=$(date +%s.%N)
say() { echo "k8s-up: $*" >&2; }
elapsed() { echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1-$2}'; }

if [ "$(id -u)" != 0 ]; then say "must run as root (containerd, kubelet, cgroups)"; exit 1; fi
need=(etcd containerd ctr runc openssl curl unshare nft)
[ "$K8S_NETPOL" = kube-router ] && need+=(iptables-legacy ipset)
for c in "${need[@]}"; do
  command -v "$c" >/dev/null || { say "$c is missing: run scripts/k8s/install-deps.sh"; exit 1; }
done
[ -x /usr/lib/cni/bridge ] || { say "CNI plugins missing: run scripts/install-deps.sh"; exit 1; }

# K8S_BINDIR: kube binaries built elsewhere (default: build.sh's cache).
bindir="${K8S_BINDIR:-$("$here/build.sh")}"
mkdir -p "$K8S_STATE"/{pids,logs,pki,bin} "$K8S_RUN"
S="$K8S_STATE"

alive() { [ -f "$S/pids/$1.pid" ] && kill -0 "$(cat "$S/pids/$1.pid")" 2>/dev/null; }
# start NAME CMD...: runs CMD in a new session (its own process group), logs to logs/NAME.log.
start() {
  local name="$1"; shift
  if alive "$name"; then return 0; fi
  setsid "$@" >"$S/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$S/pids/$name.pid"
}
died() { say "$1 did not come up; its log:"; tail -n 30 "$S/logs/$1.log" >&2; exit 1; }

# The Go helper (readiness, storage class, provisioner, drain), built from this repository.
tool="$S/bin/kubetool"
if [ ! -x "$tool" ]; then
  (cd "$repo" && CGO_ENABLED=0 go build -o "$tool" ./scripts/k8s/kubetool)
fi

node_ip="$(ip -4 -o route get 192.0.2.255 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')"
[ -n "$node_ip" ] || node_ip="$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | grep -v '^172\.17\.' | head -n1)"
[ -n "$node_ip" ] || { say "no node address (a global IPv4 address) found"; exit 1; }

# --- certificates (a CA of the cluster's own; regenerated with the state) ---
pki="$S/pki"
sign() { # name subject san
  local n="$1" subj="$2" san="$3"
  [ -f "$pki/$n.crt" ] && return 0
  openssl req -new -nodes -newkey rsa:2048 -keyout "$pki/$n.key" -out "$pki/$n.csr" -subj "$subj" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' "$san" >"$pki/$n.ext"
  openssl x509 -req -in "$pki/$n.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -out "$pki/$n.crt" -days 3650 -extfile "$pki/$n.ext" 2>/dev/null
}
if [ ! -f "$pki/ca.crt" ]; then
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 3650 \
    -subj "/CN=shipyard-k8s-ca" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:$node_ip,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
sign admin "/O=system:masters/CN=shipyard-admin" "DNS:shipyard-admin"
sign apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "DNS:kube-apiserver-kubelet-client"
sign kubelet "/O=system:nodes/CN=system:node:$K8S_NODE_NAME" "IP:$node_ip,DNS:$K8S_NODE_NAME"

kubeconfig() { # file user
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: shipyard
  cluster:
    server: https://127.0.0.1:$K8S_API_PORT
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: shipyard
  context: {cluster: shipyard, user: $2}
current-context: shipyard
KC
}
kubeconfig "$K8S_KUBECONFIG" admin
kubeconfig "$S/kubelet.kubeconfig" kubelet

# --- tier 1: etcd and the control plane ---
start etcd etcd --name shipyard --data-dir "$S/etcd" \
  --listen-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --initial-cluster "shipyard=http://127.0.0.1:$K8S_ETCD_PEER_PORT"
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$K8S_ETCD_PORT/health" >/dev/null 2>&1 && break; alive etcd || died etcd; sleep 0.1; done
curl -fsS "http://127.0.0.1:$K8S_ETCD_PORT/health" >/dev/null 2>&1 || died etcd

start kube-apiserver "$bindir/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$K8S_ETCD_PORT" \
  --bind-address=127.0.0.1 --secure-port="$K8S_API_PORT" --advertise-address="$node_ip" \
  --endpoint-reconciler-type=none --service-cluster-ip-range="$K8S_SERVICE_RANGE" \
  --client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --kubelet-client-certificate="$pki/apiserver-kubelet.crt" --kubelet-client-key="$pki/apiserver-kubelet.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
  --service-account-signing-key-file="$pki/sa.key" \
  --authorization-mode=Node,RBAC --anonymous-auth=false --allow-privileged=false --profiling=false \
  --feature-gates=PodLogsQuerySplitStreams=true
"$tool" ready -kubeconfig "$K8S_KUBECONFIG" -timeout 120s || died kube-apiserver
say "API server ready after $(elapsed) s"

start kube-controller-manager "$bindir/kube-controller-manager" \
  --kubeconfig="$K8S_KUBECONFIG" --secure-port=0 --leader-elect=false \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=false --cluster-name=shipyard --profiling=false
start kube-scheduler "$bindir/kube-scheduler" --kubeconfig="$K8S_KUBECONFIG" --leader-elect=false --profiling=false
"$tool" setup -kubeconfig "$K8S_KUBECONFIG" -class "$K8S_STORAGE_CLASS" -loopback-class "$K8S_LOOPBACK_CLASS" -gvisor-class "$K8S_GVISOR_CLASS"
# The volumes' directory is a shared mount of its own: the volume files localpv mounts on it
# here propagate into the node's mount namespace (a slave of this one), whatever the
# propagation of the host's own mounts. down.sh unmounts it with the state.
mkdir -p "$K8S_PV_ROOT"
if ! grep -q " $K8S_PV_ROOT " /proc/self/mountinfo; then
  mount --bind "$K8S_PV_ROOT" "$K8S_PV_ROOT"
  mount --make-shared "$K8S_PV_ROOT"
fi
start localpv "$tool" localpv -kubeconfig "$K8S_KUBECONFIG" -class "$K8S_STORAGE_CLASS" -root "$K8S_PV_ROOT"
sleep 0.3
for p in kube-controller-manager kube-scheduler localpv; do alive "$p" || died "$p"; done
if [ "$tier" = 1 ]; then
  say "tier 1 up in $(elapsed) s; KUBECONFIG=$K8S_KUBECONFIG"
  exit 0
fi

# --- tier 2: the node ---
# cgroup v1 hierarchies need kubelet's cgroup root to exist; cpuset needs its cpus and mems.
for h in /sys/fs/cgroup/*/; do
  [ -d "$h" ] || continue
  [ -L "${h%/}" ] && continue
  mkdir -p "$h/shipyard-k8s" 2>/dev/null || continue
  if [ -f "$h/cpuset.cpus" ]; then
    cat "$h/cpuset.cpus" >"$h/shipyard-k8s/cpuset.cpus"
    cat "$h/cpuset.mems" >"$h/shipyard-k8s/cpuset.mems"
  fi
done
mkdir -p "$S/cni/net.d" "$S/cni/loopback.d" "$S/cni/data" "$S/cni/bin" "$S/kubelet/seccomp/shipyard" "$S/pod-logs" "$S/sysctl" "$K8S_PV_ROOT"
# The CNI plugins: Debian's, and the loopback-only one of the runtime handler "loopback"
# (scripts/k8s/cni-loopback) whose Pods get no interface but lo.
for p in /usr/lib/cni/*; do ln -sf "$p" "$S/cni/bin/"; done
if [ ! -x "$S/cni/bin/shipyard-loopback" ]; then
  (cd "$repo" && CGO_ENABLED=0 go build -o "$S/cni/bin/shipyard-loopback" ./scripts/k8s/cni-loopback)
fi
cat >"$S/cni/loopback.d/10-loopback.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "shipyard-loopback", "plugins": [{"type": "shipyard-loopback"}]}
CNI
# The Localhost seccomp profile of the user-namespace opt-in (driver.k8s.seccomp_userns_profile
# is relative to the kubelet's seccomp root, <root-dir>/seccomp).
"$tool" seccomp -out "$S/kubelet/seccomp/$K8S_SECCOMP_USERNS"
# Pods talk to each other across the node's bridge (in-cluster bay to its sandboxes). With the
# Docker engine on the same host, bridged frames pass iptables' FORWARD chain, whose policy the
# engine sets to DROP: let the bridge's own traffic through (removed by down.sh).
fwd_chain=FORWARD
iptables -n -L DOCKER-USER >/dev/null 2>&1 && fwd_chain=DOCKER-USER
iptables -C "$fwd_chain" -i "$K8S_BRIDGE" -o "$K8S_BRIDGE" -j ACCEPT 2>/dev/null ||
  iptables -I "$fwd_chain" -i "$K8S_BRIDGE" -o "$K8S_BRIDGE" -j ACCEPT
cat >"$S/cni/net.d/10-shipyard.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "shipyard-k8s",
  "plugins": [
    {"type": "bridge", "bridge": "$K8S_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$S/cni/data", "ranges": [[{"subnet": "$K8S_POD_SUBNET"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
CNI
# The runtime handler runsc (RuntimeClass gvisor): gVisor's containerd shim and runsc, built by
# scripts/gvisor.sh (pinned, cached). containerd finds the shim on its PATH (node.sh puts
# $S/runtimes first); the shim runs runsc with the systrap platform, as the Docker engine does.
# Its containers start from containerd's default spec with RLIMIT_NPROC below the Pods' pids
# limit (kubetool runsc-spec says why). The shim is built against containerd 2, which answers
# "start" with its bootstrap parameters as JSON; Debian's containerd (1.6) reads the bare
# address, so the shim on the PATH is a wrapper that hands over the address alone.
gvisor="$("$repo/scripts/gvisor.sh" build)"
mkdir -p "$S/runtimes"
cat >"$S/runtimes/containerd-shim-runsc-v1" <<SH
#!/bin/sh
shim="$gvisor/containerd-shim-runsc-v1"
for action; do :; done
[ "\$action" = start ] || exec "\$shim" "\$@"
out="\$("\$shim" "\$@")" || exit
printf '%s\n' "\$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p'
SH
chmod +x "$S/runtimes/containerd-shim-runsc-v1"
cat >"$S/runsc.toml" <<TOML
binary_name = "$gvisor/runsc"
root = "$K8S_RUN/runsc"
[runsc_config]
  platform = "systrap"
TOML
ctr oci spec | "$tool" runsc-spec -pids-limit "$K8S_POD_PIDS_LIMIT" >"$S/runsc-spec.json"
cat >"$S/containerd.toml" <<TOML
version = 2
root = "$S/containerd"
state = "$K8S_RUN/containerd"
[grpc]
  address = "$K8S_CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$K8S_PAUSE_IMAGE"
  # These machines lack CAP_SYS_RESOURCE: without this, pod sandboxes fail to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    # RuntimeClass shipyard-loopback: runc, with a CNI configuration that attaches nothing.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.loopback]
      runtime_type = "io.containerd.runc.v2"
      cni_conf_dir = "$S/cni/loopback.d"
      cni_max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      base_runtime_spec = "$S/runsc-spec.json"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$S/runsc.toml"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$S/cni/bin"
    conf_dir = "$S/cni/net.d"
TOML
cat >"$S/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /shipyard-k8s
containerRuntimeEndpoint: unix://$K8S_CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
readOnlyPort: 0
healthzPort: 0
failSwapOn: false
podPidsLimit: $K8S_POD_PIDS_LIMIT
# One-shots' output is read back from these logs (WaitInstance): 64 MiB a container, and the
# stdout and stderr of a container returned apart (the API's log "stream" option).
containerLogMaxSize: 64Mi
containerLogMaxFiles: 2
featureGates: {PodLogsQuerySplitStreams: true}
podLogsDir: $S/pod-logs
volumePluginDir: $S/kubelet/volume-plugins
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%", nodefs.inodesFree: "2%"}
serializeImagePulls: false
resolvConf: /etc/resolv.conf
YAML

start node unshare --mount --propagation slave "$here/node.sh" "$bindir" "$node_ip"
for _ in $(seq 1 200); do
  ctr -a "$K8S_CONTAINERD_SOCK" version >/dev/null 2>&1 && break
  alive node || died node
  sleep 0.1
done
ctr -a "$K8S_CONTAINERD_SOCK" version >/dev/null 2>&1 || died node
"$here/images.sh"
"$tool" ready -kubeconfig "$K8S_KUBECONFIG" -node "$K8S_NODE_NAME" -timeout 120s || died node

# --- the NetworkPolicy enforcer ---
# The CNI bridge filters nothing: kube-router's network policy controller (its router and
# service proxy off) turns every Pod's policies into iptables chains and ipsets on the bridge's
# traffic (br_netfilter) and on the node's INPUT and OUTPUT. It rewrites the whole filter table
# on each sync (iptables-save, edit, iptables-restore); on this machine the Docker engine
# changes that table at any moment, through the nf_tables backend, so a rule the engine added
# mid-sync would be lost. kube-router therefore gets the legacy backend (a PATH of its own whose
# iptables are the -legacy commands): its tables are apart from the engine's, and a packet
# passes both, so its REJECT holds whatever the engine's chains accept. It starts once the Node
# exists (it reads the node's address) and is ready when its top-level chains are in place.
if [ "$K8S_NETPOL" = kube-router ]; then
  kube_router="$K8S_CACHE/bin/kube-router-$KUBE_ROUTER_VERSION/kube-router"
  [ -x "$kube_router" ] || "$here/build.sh" >/dev/null
  mkdir -p "$S/netpol/bin"
  for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf "$(command -v "${c/tables/tables-legacy}")" "$S/netpol/bin/$c"
  done
  t_np=$(date +%s.%N)
  start kube-router env PATH="$S/netpol/bin:$PATH" "$kube_router" \
    --kubeconfig="$K8S_KUBECONFIG" --hostname-override="$K8S_NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range="$K8S_SERVICE_RANGE" \
    --health-port=0 --metrics-port=0
  for _ in $(seq 1 300); do
    iptables-legacy -w -S FORWARD 2>/dev/null | grep -q -- "-j KUBE-ROUTER-FORWARD" && break
    alive kube-router || died kube-router
    sleep 0.1
  done
  iptables-legacy -w -S FORWARD 2>/dev/null | grep -q -- "-j KUBE-ROUTER-FORWARD" || died kube-router
  say "NetworkPolicy enforcer (kube-router $KUBE_ROUTER_VERSION) ready in $(echo "$(date +%s.%N) $t_np" | awk '{printf "%.1f", $1-$2}') s"
fi
# --- the service proxy ---
# kube-proxy (built by build.sh from the same source) makes Services' cluster addresses work
# from Pods and from the node, in nftables mode: its rules live in tables of their own (ip and
# ip6 "kube-proxy"), apart from the Docker engine's and kube-router's (legacy) iptables, and it
# sets no sysctl (iptables mode would turn route_localnet on host-wide; the conntrack settings
# below are zeros, which leave the host's as they are). The kernel has what it needs (nftables
# maps, numgen, fib, masquerade, and br_netfilter for traffic between Pods on the bridge);
# there is no IPVS. clusterCIDR is the Pod subnet: a Pod's connection to a Service keeps its
# source address (what NetworkPolicies and the egress gateway go by); only traffic from outside
# the subnet (the node) is masqueraded. Ready when its health port answers (first sync done).
if [ -z "${K8S_NO_KUBE_PROXY:-}" ]; then
  cat >"$S/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $K8S_KUBECONFIG}
hostnameOverride: $K8S_NODE_NAME
clusterCIDR: $K8S_POD_SUBNET
healthzBindAddress: 127.0.0.1:$K8S_PROXY_HEALTH_PORT
metricsBindAddress: 127.0.0.1:$K8S_PROXY_METRICS_PORT
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  t_kp=$(date +%s.%N)
  start kube-proxy "$bindir/kube-proxy" --config="$S/kube-proxy.yaml"
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$K8S_PROXY_HEALTH_PORT/healthz" >/dev/null 2>&1 && break
    alive kube-proxy || died kube-proxy
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$K8S_PROXY_HEALTH_PORT/healthz" >/dev/null 2>&1 || died kube-proxy
  say "service proxy (kube-proxy, nftables) ready in $(echo "$(date +%s.%N) $t_kp" | awk '{printf "%.1f", $1-$2}') s"
fi
say "node $K8S_NODE_NAME ($node_ip) Ready; cluster up in $(elapsed) s; KUBECONFIG=$K8S_KUBECONFIG"
