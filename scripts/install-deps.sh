#!/usr/bin/env bash
# Installs, idempotently, the Debian packages that building the sandbox image and running the
# tests need: mmdebstrap (the image's root filesystem), and a host-side Jupyter kernel with
# matplotlib for ship's tests (run with /usr/bin/python3; the pyenv python3 on PATH does not see
# Debian's python3-* packages), the PostgreSQL server whose initdb/postgres binaries the
# PostgreSQL store's tests run as a throw-away cluster (internal/testenv/pgtest; the package's
# own cluster is not used), nftables for bay's sandbox firewall (internal/bay/netguard),
# iproute2 for the network namespaces its test makes, and a headless Chromium with fonts for
# gull's tests (/usr/lib/chromium/chromium-headless-shell, the binary the gull image runs; on
# the host it comes from the host's Debian release, e.g. bookworm-security, not trixie);
# docker-compose and systemd's systemd-analyze for the tests of deploy/compose and
# deploy/systemd.
#
# `install-deps.sh run` installs only what `make run` needs (building the images and serving:
# mmdebstrap, nft for the sandbox firewall, ip and nsenter for the egress routes), so that a
# fresh machine serves sandboxes sooner; the test set comes with `make test`.
set -euo pipefail
pkgs=(mmdebstrap gpg uidmap ca-certificates nftables iproute2 util-linux e2fsprogs)
browser_pkgs=()
if [ "${1:-test}" != run ]; then
  pkgs+=(python3-ipykernel python3-matplotlib postgresql docker-compose systemd)
  # Installed without Recommends: Chromium's would pull in a desktop's worth of packages.
  browser_pkgs=(chromium-headless-shell fonts-liberation fonts-dejavu-core)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
missing_browser=()
for p in "${browser_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_browser+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_browser[@]} -eq 0 ]; then
  exit 0
fi
missing_all=("${missing[@]}" "${missing_browser[@]}")
if [ "$(id -u)" != 0 ]; then
  echo "missing packages: ${missing_all[*]}; run: sudo apt-get install -y ${missing_all[*]}" >&2
  exit 1
fi
echo "installing: ${missing_all[*]}"
apt-get update -qq
# With recommends: mmdebstrap uses gpg and the other recommended helpers when it checks the
# archive keyring; this is the set the image build was tested with.
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if [ ${#missing_browser[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_browser[@]}"
fi
