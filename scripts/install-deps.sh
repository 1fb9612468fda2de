#!/usr/bin/env bash
# Installs, idempotently, the Debian packages that building the sandbox image and running the
# tests need: mmdebstrap (the image's root filesystem), and a host-side Jupyter kernel with
# matplotlib for ship's tests (run with /usr/bin/python3; the pyenv python3 on PATH does not see
# Debian's python3-* packages), the PostgreSQL server whose initdb/postgres binaries the
# PostgreSQL store's tests run as a throw-away cluster (internal/testenv/pgtest; the package's
# own cluster is not used), nftables for bay's sandbox firewall (internal/bay/netguard) and
# iproute2 for the network namespaces its test makes.
set -euo pipefail
pkgs=(mmdebstrap gpg uidmap python3-ipykernel python3-matplotlib ca-certificates postgresql nftables iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
apt-get update -qq
# With recommends: mmdebstrap uses gpg and the other recommended helpers when it checks the
# archive keyring; this is the set the image build was tested with.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
