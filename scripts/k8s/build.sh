#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy from
# source through the Go module proxy, once: the binaries land in $K8S_CACHE/bin/$K8S_VERSION and
# a later run that finds all five returns at once (one that finds some builds the others). k8s.io/kubernetes's module zip lacks its staging/ tree,
# so its own "=> ./staging/..." replace directives cannot work; a small wrapper module requires
# k8s.io/kubernetes and points every staging module at its published v0.x twin instead.
# Also builds the node's NetworkPolicy enforcer, kube-router (see build_kube_router), into
# $K8S_CACHE/bin/kube-router-$KUBE_ROUTER_VERSION.
# Prints the kube binaries' directory on stdout (everything else goes to stderr).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/env.sh"

bindir="$K8S_CACHE/bin/$K8S_VERSION"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
kube_router="$K8S_CACHE/bin/kube-router-$KUBE_ROUTER_VERSION/kube-router"
kube_built() {
  for b in "${bins[@]}"; do [ -x "$bindir/$b" ] || return 1; done
}
if kube_built && [ -x "$kube_router" ]; then
  echo "$bindir"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin"
mkdir -p "$K8S_CACHE"
# One build at a time: a second caller waits for the first one's binaries.
exec 9>"$K8S_CACHE/build.lock"
flock 9

# build_kube_router: kube-router's network policy controller is the test node's enforcer
# (up.sh runs it with the router and the service proxy off). The SIG's kube-network-policies
# cannot work on these machines: it hands packets to user space with the nftables "queue"
# statement, which their kernel lacks (CONFIG_NFT_QUEUE unset, no loadable modules), so its
# rules are refused. kube-router filters with iptables and ipset, which the kernel has.
# v2.1.0 is the only v2 release the module proxy serves, and security flaws are reported
# against it: it runs on the test node only, never in a deployment of this project.
build_kube_router() {
  [ -x "$kube_router" ] && return 0
  local start dir
  start=$(date +%s)
  dir="$(dirname "$kube_router")"
  echo "k8s build: kube-router $KUBE_ROUTER_VERSION (the NetworkPolicy enforcer; cold: minutes of CPU)" >&2
  mkdir -p "$dir.tmp"
  # go install pkg@version builds with the module's own go.mod, outside any module here.
  (cd "$dir.tmp" && CGO_ENABLED=0 GOFLAGS= GOBIN="$dir.tmp" go install -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION") >&2
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  echo "k8s build: kube-router $KUBE_ROUTER_VERSION built in $(( $(date +%s) - start )) s" >&2
}

if kube_built; then
  build_kube_router
  echo "$bindir"
  exit 0
fi

src="$K8S_CACHE/src/$K8S_VERSION"
mkdir -p "$src"
cd "$src"
# The staging versions follow the kubernetes version: v1.X.Y -> v0.X.Y.
staging_version="v0.${K8S_VERSION#v1.}"
if [ ! -f go.sum ]; then
  echo "k8s build: preparing the wrapper module in $src" >&2
  GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
  upstream_mod="$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  go_line="$(grep -m1 '^go ' "$upstream_mod")"
  {
    echo "module shipyard.local/kubebuild"
    echo
    echo "$go_line"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s\.io/[^ ]*\) => \./staging/.*#\t\1 => \1 '"$staging_version"'#p' "$upstream_mod"
    echo ")"
  } > go.mod.new
  mv go.mod.new go.mod
  cat > tools.go <<'GO'
//go:build tools

// Package kubebuild only pins the commands this module builds.
package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  GOFLAGS=-mod=mod go mod tidy -e >&2 || { rm -f go.sum; exit 1; }
fi

# Each binary lands in $bindir once whole (a .part renamed), so a run cut short, or a cache
# made before a binary joined the list, only builds what is missing.
mkdir -p "$bindir"
start=$(date +%s)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
for b in "${bins[@]}"; do
  [ -x "$bindir/$b" ] && continue
  echo "k8s build: $b (cold: minutes of CPU)" >&2
  t=$(date +%s)
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bindir/$b.part" "k8s.io/kubernetes/cmd/$b" >&2
  mv "$bindir/$b.part" "$bindir/$b"
  echo "k8s build: $b built in $(( $(date +%s) - t )) s" >&2
done
echo "k8s build: done in $(( $(date +%s) - start )) s" >&2
build_kube_router
echo "$bindir"
