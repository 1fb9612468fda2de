#!/bin/sh
# Customize hook of the gull (browser runtime) root filesystem.
#
# Called by mmdebstrap as: sh customize.sh "$1" gull
# where $1 is the root of the freshly installed Debian tree.
#
# Result: the same user and workspace as the ship images (user shipyard, uid/gid 1000, HOME
# and /workspace owned by 1000:1000, so a fresh named volume is writable with no root step),
# /tmp 1777, /opt/shipyard for the built-in skills, gull (/usr/local/bin/gull ->
# /opt/shipyard/bin/gull), a prebuilt font cache, and a check that the browser is where gull
# calls it and that neither Python nor Node came in.
set -eu

root=${1:?usage: customize.sh ROOT FLAVOUR}

if ! grep -q '^shipyard:' "$root/etc/passwd"; then
	echo 'shipyard:x:1000:1000::/workspace:/bin/sh' >>"$root/etc/passwd"
	echo 'shipyard:x:1000:' >>"$root/etc/group"
	if [ -f "$root/etc/shadow" ]; then echo 'shipyard:!:::::::' >>"$root/etc/shadow"; fi
	if [ -f "$root/etc/gshadow" ]; then echo 'shipyard:!::' >>"$root/etc/gshadow"; fi
fi

install -d -m 0755 -o 1000 -g 1000 "$root/workspace"
chmod 1777 "$root/tmp"
install -d -m 0755 -o 0 -g 0 "$root/opt/shipyard" "$root/opt/shipyard/bin" "$root/opt/shipyard/skills"
# The image build step copies gull to /opt/shipyard/bin/gull.
ln -sf /opt/shipyard/bin/gull "$root/usr/local/bin/gull"

test -x "$root/usr/lib/chromium/chromium-headless-shell" || {
	echo "E: /usr/lib/chromium/chromium-headless-shell is missing" >&2
	exit 1
}
for f in /usr/bin/python3 /usr/bin/node; do
	if [ -e "$root$f" ]; then
		echo "E: $f is in the gull image (a dependency pulled it in)" >&2
		exit 1
	fi
done
chroot "$root" /usr/bin/fc-cache -s >/dev/null
echo "I: gull image: $(chroot "$root" /usr/bin/fc-list | wc -l) fonts"

# Reproducible output: mmdebstrap copies the host's resolv.conf and hostname (Docker
# bind-mounts its own at run time).
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
