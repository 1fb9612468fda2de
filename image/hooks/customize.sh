#!/bin/sh
# Customize hook of the Shipyard sandbox root filesystem.
#
# Called by mmdebstrap as: sh customize.sh "$1" FLAVOUR
# where $1 is the root of the freshly installed Debian tree. It also works on a
# live system with ROOT=/ (see Dockerfile.registry), hence `chroot "$root"`.
#
# Result: user shipyard (uid/gid 1000, HOME=/workspace, /bin/bash, no sudo),
# ship's system user ship (uid/gid 999, no login),
# /workspace owned by 1000:1000 (a fresh named volume copies this ownership, so
# the workspace is writable with no root step), /tmp 1777, /opt/shipyard for
# built-in skills, ship (/usr/local/bin/ship -> /opt/shipyard/bin/ship) and a
# matplotlib config dir with a prebuilt font cache.
set -eu

root=${1:?usage: customize.sh ROOT FLAVOUR}
flavour=${2:?usage: customize.sh ROOT FLAVOUR}

# The user, written directly: useradd (package passwd) is not in the image.
if ! grep -q '^shipyard:' "$root/etc/passwd"; then
	# Empty GECOS, as useradd writes it: agents and tests grep for this exact line.
	echo 'shipyard:x:1000:1000::/workspace:/bin/bash' >>"$root/etc/passwd"
	echo 'shipyard:x:1000:' >>"$root/etc/group"
	if [ -f "$root/etc/shadow" ]; then echo 'shipyard:!:::::::' >>"$root/etc/shadow"; fi
	if [ -f "$root/etc/gshadow" ]; then echo 'shipyard:!::' >>"$root/etc/gshadow"; fi
fi

# Ship's own system user: ship starts as root with CAP_SETUID, CAP_SETGID and
# CAP_KILL only, switches to this user at once and runs user code as shipyard
# (internal/ship/privsep), so user code cannot read its memory or environment
# nor signal it.
if ! grep -q '^ship:' "$root/etc/passwd"; then
	echo 'ship:x:999:999::/nonexistent:/usr/sbin/nologin' >>"$root/etc/passwd"
	echo 'ship:x:999:' >>"$root/etc/group"
	if [ -f "$root/etc/shadow" ]; then echo 'ship:!:::::::' >>"$root/etc/shadow"; fi
	if [ -f "$root/etc/gshadow" ]; then echo 'ship:!::' >>"$root/etc/gshadow"; fi
fi

install -d -m 0755 -o 1000 -g 1000 "$root/workspace"
chmod 1777 "$root/tmp"
install -d -m 0755 -o 0 -g 0 "$root/opt/shipyard" "$root/opt/shipyard/bin" "$root/opt/shipyard/skills"
# The image build step copies ship to /opt/shipyard/bin/ship.
ln -sf /opt/shipyard/bin/ship "$root/usr/local/bin/ship"
# matplotlib only uses MPLCONFIGDIR when it is writable, so it belongs to the
# sandbox user; everyone can read it.
install -d -m 0755 -o 1000 -g 1000 "$root/opt/shipyard/mplconfig"

# Reproducible output: mmdebstrap copies the host's resolv.conf and hostname.
# Docker bind-mounts its own versions over both at run time (and during a
# `docker build`, where they cannot be removed).
if [ "$root" != / ]; then
	rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
fi

if [ "$flavour" = full ]; then
	# Prebuild matplotlib's font list as the sandbox user (otherwise the first
	# plot of every sandbox spends seconds scanning ~100 font files).
	chroot --userspec=1000:1000 "$root" /usr/bin/env -i \
		HOME=/workspace MPLCONFIGDIR=/opt/shipyard/mplconfig LANG=C.UTF-8 \
		PATH=/usr/local/bin:/usr/bin:/bin \
		/usr/bin/python3 -c 'import matplotlib.pyplot, matplotlib.font_manager as fm; print("I: matplotlib font cache:", len(fm.fontManager.ttflist), "fonts")'
	ls "$root/opt/shipyard/mplconfig"/fontlist-*.json >/dev/null
fi
