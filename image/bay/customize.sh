#!/bin/sh
# Customize hook of the bay (control plane) root filesystem.
#
# Called by mmdebstrap as: sh customize.sh "$1" bay
# where $1 is the root of the freshly installed Debian tree.
#
# Result: user bay (uid/gid 1000, no login, no home but its data directory), /var/lib/bay (its
# BAY_DATA_DIR: the SQLite file, credentials.json, the skill library) owned by 1000:1000, mode
# 0770, so that a fresh volume mounted there is writable with no root step both by bay as uid
# 1000 and by a bay started as root with group 1000 and no capability to override file modes
# (deploy/compose, which needs root for CAP_NET_ADMIN), /etc/bay for a mounted
# config.yaml, bay (/usr/local/bin/bay -> /opt/shipyard/bin/bay), and a check that no
# interpreter came in with a dependency.
set -eu

root=${1:?usage: customize.sh ROOT FLAVOUR}

if ! grep -q '^bay:' "$root/etc/passwd"; then
	echo 'bay:x:1000:1000::/var/lib/bay:/usr/sbin/nologin' >>"$root/etc/passwd"
	echo 'bay:x:1000:' >>"$root/etc/group"
	if [ -f "$root/etc/shadow" ]; then echo 'bay:!:::::::' >>"$root/etc/shadow"; fi
	if [ -f "$root/etc/gshadow" ]; then echo 'bay:!::' >>"$root/etc/gshadow"; fi
fi

install -d -m 0770 -o 1000 -g 1000 "$root/var/lib/bay"
install -d -m 0755 -o 0 -g 0 "$root/etc/bay" "$root/opt/shipyard" "$root/opt/shipyard/bin"
chmod 1777 "$root/tmp"
# The image build step copies bay to /opt/shipyard/bin/bay.
ln -sf /opt/shipyard/bin/bay "$root/usr/local/bin/bay"

for f in /usr/bin/python3 /usr/bin/node; do
	if [ -e "$root$f" ]; then
		echo "E: $f is in the bay image (a dependency pulled it in)" >&2
		exit 1
	fi
done
test -x "$root/usr/sbin/nft" || {
	echo "E: /usr/sbin/nft is missing" >&2
	exit 1
}

# Reproducible output: mmdebstrap copies the host's resolv.conf and hostname (the engine and
# the kubelet mount their own at run time).
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
