#!/usr/bin/env bash
# The Debian packages the test cluster needs (scripts/k8s/up.sh), installed when missing:
# etcd, a containerd of the node's own with runc, the CNI plugins, openssl for its
# certificates, curl for its probes, iptables (its legacy backend) and ipset for the
# NetworkPolicy enforcer (kube-router), and nftables for the service proxy (kube-proxy).
set -euo pipefail
pkgs=(etcd-server containerd runc containernetworking-plugins openssl curl iptables ipset nftables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
