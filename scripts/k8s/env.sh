# Shared settings of the scripts in scripts/k8s (sourced, not run).
# K8S_VERSION: the kubernetes release built from source.
# K8S_CACHE: where the built binaries and the wrapper module live across runs and clones.
# K8S_STATE: the running cluster's files (etcd data, certificates, logs, pids, kubeconfig).
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
# KUBE_ROUTER_VERSION: the NetworkPolicy enforcer of the test node (kube-router, firewall only),
# built from source by build.sh next to the kube binaries.
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
if [ -z "${K8S_CACHE:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    K8S_CACHE=/var/cache/shipyard/k8s
  else
    K8S_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/shipyard/k8s"
  fi
fi
K8S_STATE="${K8S_STATE:-/var/lib/shipyard-k8s}"
# K8S_RUN: sockets and containerd's state (a tmpfs is not needed, any directory works).
K8S_RUN="${K8S_RUN:-/run/shipyard-k8s}"
K8S_ETCD_PORT="${K8S_ETCD_PORT:-12379}"
K8S_ETCD_PEER_PORT="${K8S_ETCD_PEER_PORT:-12380}"
K8S_API_PORT="${K8S_API_PORT:-16443}"
K8S_NODE_NAME="${K8S_NODE_NAME:-shipyard-node}"
# K8S_POD_SUBNET: the CNI bridge's pod addresses; routable from the host through the bridge.
K8S_POD_SUBNET="${K8S_POD_SUBNET:-10.244.0.0/24}"
K8S_SERVICE_RANGE="${K8S_SERVICE_RANGE:-10.96.0.0/16}"
K8S_BRIDGE="${K8S_BRIDGE:-shipyard-cni0}"
K8S_CONTAINERD_SOCK="${K8S_CONTAINERD_SOCK:-$K8S_RUN/containerd.sock}"
K8S_KUBECONFIG="${K8S_KUBECONFIG:-$K8S_STATE/admin.kubeconfig}"
K8S_PAUSE_IMAGE="shipyard.local/k8s-pause:1"
# K8S_STORAGE_CLASS: the test node's storage class, served by scripts/k8s/localpv.
K8S_STORAGE_CLASS="shipyard-local"
K8S_PV_ROOT="$K8S_STATE/volumes"
# K8S_LOOPBACK_CLASS: the RuntimeClass whose Pods get loopback only (containerd handler
# "loopback"; driver.k8s.no_network_runtime_class of the tests).
K8S_LOOPBACK_CLASS="shipyard-loopback"
# K8S_GVISOR_CLASS: the RuntimeClass of the node's gVisor handler "runsc" (containerd's
# runsc shim, scripts/gvisor.sh; driver.k8s.runsc_runtime_class's default).
K8S_GVISOR_CLASS="gvisor"
# K8S_POD_PIDS_LIMIT: the kubelet's podPidsLimit, every Pod's pids limit (the runsc handler's
# RLIMIT_NPROC follows from it).
K8S_POD_PIDS_LIMIT=256
# K8S_SECCOMP_USERNS: the user-namespace seccomp profile under the kubelet's seccomp root
# (driver.k8s.seccomp_userns_profile's default).
K8S_SECCOMP_USERNS="shipyard/userns.json"
# K8S_NETPOL: "kube-router" (default) runs the NetworkPolicy enforcer on the node; "none" leaves
# the CNI bridge unfiltered (policies are then stored and never enforced).
K8S_NETPOL="${K8S_NETPOL:-kube-router}"
# K8S_PROXY_HEALTH_PORT, K8S_PROXY_METRICS_PORT: kube-proxy's health and metrics ports (loopback).
K8S_PROXY_HEALTH_PORT="${K8S_PROXY_HEALTH_PORT:-10256}"
K8S_PROXY_METRICS_PORT="${K8S_PROXY_METRICS_PORT:-10249}"
