#!/usr/bin/env bash
# `make test` as a user's first run sees it: a fresh clone of HEAD, an empty HOME (so empty pip,
# ansible-test and $GPUFLEET_CACHE caches: the CPU engine, SGLang releases, router wheels and the
# model are all fetched and built again) and base images that do not exist yet (setup builds them
# with debootstrap under a fresh tag). The Docker engine and apt's packages stay: a machine that
# lacks them is what setup's own install steps cover (scripts/ensure-docker.sh, apt_install).
# Lesson (issue 12): every cached path must also run cold, or it is untested.
#   scripts/test-cold.sh [--keep]      (environment such as STAGES/SCENARIOS passes through)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
keep=false
[ "${1:-}" = --keep ] && keep=true

work=$(mktemp -d /var/tmp/gpufleet-cold.XXXXXX)
echo "cold: fresh clone of $(git -C "$root" rev-parse --short HEAD) in $work/checkout (uncommitted changes are not in it)"
git clone -q "$root" "$work/checkout" || exit 1
mkdir -p "$work/home"
# Base images under names no earlier run built: setup must debootstrap them (the `latest` images of
# other checkouts on this Docker engine stay untouched). Removed again at the end.
tag="cold-$(basename "$work" | tr -cd '[:alnum:]' | tr '[:upper:]' '[:lower:]')"
export GPUFLEET_MOLECULE_IMAGE="gpufleet/debian12-systemd:$tag" GPUFLEET_MOLECULE_IMAGE_TRIXIE="gpufleet/debian13-systemd:$tag"

t0=$SECONDS
# -u PYTHONPYCACHEPREFIX: the bytecode cache (scripts/test.sh) starts empty too.
(cd "$work/checkout" && env -u PYTHONPYCACHEPREFIX HOME="$work/home" GPUFLEET_CACHE="$work/home/.cache/gpufleet" scripts/test.sh)
rc=$?
echo "cold: make test exited $rc after $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s"
if docker info >/dev/null 2>&1; then
  docker image rm -f "$GPUFLEET_MOLECULE_IMAGE" "$GPUFLEET_MOLECULE_IMAGE_TRIXIE" >/dev/null 2>&1 || true
fi
if $keep; then
  echo "cold: kept $work (logs under checkout/tests/output/logs)"
else
  mkdir -p "$root/tests/output"
  saved="$root/tests/output/cold-logs-$(date +%Y%m%d-%H%M%S)"
  if cp -r "$work/checkout/tests/output/logs" "$saved"; then
    echo "cold: logs saved in $saved"
    rm -rf "$work"
  else
    echo "cold: could not copy the logs; kept $work"
  fi
fi
exit $rc
