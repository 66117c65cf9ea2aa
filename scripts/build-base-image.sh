#!/usr/bin/env bash
# Build the local systemd base image the Molecule scenarios boot, unless it already exists.
# No registry is reachable on the development/CI machines, so the image is made with debootstrap
# and `docker import`. A user with a registry sets GPUFLEET_MOLECULE_IMAGE instead (for example an
# Ubuntu 24.04 systemd image) and this script is not needed.
#   usage: build-base-image.sh [SUITE [IMAGE]]   (defaults: bookworm gpufleet/debian12-systemd:latest)
set -euo pipefail

suite=${1:-bookworm}
image=${2:-gpufleet/debian12-systemd:latest}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# The image carries a hash of its recipe (the suite, the package list and this script): an image built by an
# older recipe (e.g. before libnuma1 joined the list, issue 32) is rebuilt, not reused, on a machine that keeps
# its images between runs.
packages=systemd,systemd-sysv,python3,python3-apt,python3-venv,sudo,iproute2,git,ca-certificates,procps,gnupg,libnuma1
code_cache=$(cd "$(dirname "$0")/.." && pwd)/tests/support/ansiballz_code_cache/gpufleet_ansiballz_code_cache.py
recipe=$( { echo "$suite $packages"; cat "$0" "$code_cache"; } | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "gpufleet.recipe" }}' "$image" 2>/dev/null)" = "$recipe" ]; then
  echo "base image: $image present"
  exit 0
fi
docker image inspect "$image" >/dev/null 2>&1 && echo "base image: $image was built by another recipe; rebuilding"

if ! command -v debootstrap >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq debootstrap >/dev/null
fi

rootfs=$(mktemp -d /var/tmp/gpufleet-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "base image: debootstrap $suite into $rootfs (about a minute)"
debootstrap --variant=minbase \
  --include="$packages" \
  "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log" >&2; exit 1; }
rm -f "$rootfs.log"
# Units that make no sense in a container and slow boot or fail noisily.
for unit in systemd-remount-fs.service getty.target console-getty.service systemd-udevd.service \
            systemd-udev-trigger.service systemd-firstboot.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
# Test hosts only: Ansible's module payloads compiled once per content instead of on every module run (a quarter
# of each module run's CPU; the file says what it does and why).
site_packages="$rootfs/usr/lib/python3/dist-packages"
install -m 0644 "$code_cache" "$site_packages/gpufleet_ansiballz_code_cache.py"
echo 'import gpufleet_ansiballz_code_cache; gpufleet_ansiballz_code_cache.install()' >"$site_packages/gpufleet_ansiballz_code_cache.pth"
# apt inside the container must not try to start services during image use (policy-rc.d is absent:
# services *should* start, since the roles manage real systemd units).
echo "base image: importing as $image"
tar -C "$rootfs" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' -c 'ENV container=docker' -c "LABEL gpufleet.recipe=$recipe" - "$image" >/dev/null
echo "base image: $image built"
