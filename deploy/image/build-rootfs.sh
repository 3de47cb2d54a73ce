#!/usr/bin/env bash
# An image without a registry: a Debian root file system (debootstrap, the distribution's own packages) with
# the code of one commit in /opt/travel/app and its locked dependencies in /opt/travel/venv, the user travel
# (uid 10001), packed as a tarball an operator imports (docs/operations.md "An image without a registry"):
#
#   sudo deploy/image/build-rootfs.sh travel-REL.tar.gz [COMMIT]        # as root: debootstrap and chroot
#   podman import --change 'USER 10001:10001' --change 'WORKDIR /opt/travel/app' \
#     --change 'ENTRYPOINT ["/opt/travel/venv/bin/python", "-m"]' travel-REL.tar.gz travel:REL
#   # or without a container engine: tar -xpf into a directory, then systemd-nspawn -D DIR --user=travel ...
#
# Settings: TRAVEL_SUITE (bookworm), TRAVEL_MIRROR (http://deb.debian.org/debian), TRAVEL_BASE_CACHE (a
# directory: the debootstrap base is made once there and copied on later builds), PIP_CERT (a CA bundle
# the build's pip needs to reach the package index, copied into the build root for the build only).
# The gRPC stubs are generated here, outside the root, with this checkout's .venv (scripts/_bootstrap.sh).
set -euo pipefail

out=${1:?usage: build-rootfs.sh OUT.tar.gz [COMMIT]}
commit=${2:-HEAD}
suite=${TRAVEL_SUITE:-bookworm}
mirror=${TRAVEL_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")/../.." && pwd)
py="$here/.venv/bin/python"
[ "$(id -u)" = 0 ] || { echo "build-rootfs.sh: run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "build-rootfs.sh: install debootstrap (apt-get install debootstrap)" >&2; exit 2; }
[ -x "$py" ] || { echo "build-rootfs.sh: no $py: run scripts/_bootstrap.sh first (it makes the stubs' tools)" >&2; exit 2; }

work=$(mktemp -d /var/tmp/travel-image.XXXXXX)
root="$work/root"
cleanup() {
    for m in proc dev; do mountpoint -q "$root/$m" && umount -l "$root/$m"; done
    rm -rf "$work"
}
trap cleanup EXIT

# 1. The base: Debian's python3 (3.11 on bookworm, the version the lock is made for) and nothing else.
base() {
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$suite" "$1" "$mirror" >&2
}
if [ -n "${TRAVEL_BASE_CACHE:-}" ]; then
    if [ ! -x "$TRAVEL_BASE_CACHE/usr/bin/python3" ]; then
        rm -rf "$TRAVEL_BASE_CACHE.part" && base "$TRAVEL_BASE_CACHE.part" && mv "$TRAVEL_BASE_CACHE.part" "$TRAVEL_BASE_CACHE"
    fi
    cp -a "$TRAVEL_BASE_CACHE" "$root"
else
    base "$root"
fi

# 2. The code of the commit, with its stubs generated from proto/ (the generators stay out of the image).
src="$work/src"
mkdir -p "$src"
git -C "$here" archive "$commit" pyproject.toml requirements.lock proto scripts/gen_protos.py \
    svckit authsvc webhookd edge portal svcctl svccli docs | tar -x -C "$src"
(cd "$src" && PATH="$(dirname "$py"):$PATH" "$py" scripts/gen_protos.py >/dev/null)
install -d -m 0755 "$root/opt/travel/app"
for d in svckit authsvc webhookd edge portal svcctl svccli travel docs; do cp -a "$src/$d" "$root/opt/travel/app/"; done
find "$root/opt/travel/app" -name __pycache__ -prune -exec rm -rf {} +
git -C "$here" rev-parse "$commit" > "$root/opt/travel/app/RELEASE"
cp "$src/requirements.lock" "$work/requirements.lock"

# 3. The virtualenv: exactly the locked versions, each checked against its hash, by the image's python.
mount --bind /proc "$root/proc" && mount --bind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$work/requirements.lock" "$root/tmp/requirements.lock"
cert_env=()
if [ -n "${PIP_CERT:-}" ]; then cp "$PIP_CERT" "$root/tmp/pip-ca.crt"; cert_env=(PIP_CERT=/tmp/pip-ca.crt); fi
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "${cert_env[@]}" \
    sh -ec 'python3 -m venv /opt/travel/venv
            /opt/travel/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check \
                --require-hashes -r /tmp/requirements.lock
            groupadd --system --gid 10001 travel
            useradd --system --uid 10001 --gid travel --no-create-home --home-dir /nonexistent \
                --shell /usr/sbin/nologin travel'
for m in proc dev; do umount -l "$root/$m"; done
rm -f "$root/tmp/requirements.lock" "$root/tmp/pip-ca.crt"
: > "$root/etc/resolv.conf"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* "$root/root/.cache"

# 4. The tarball (numeric owners: the code is root's, read-only to uid 10001).
tar --numeric-owner -C "$root" -czf "$out" .
echo "$out: $(du -h "$out" | cut -f1), commit $(cat "$root/opt/travel/app/RELEASE")"
