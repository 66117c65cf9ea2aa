#!/usr/bin/env bash
# Controller side of check_service_sandbox.py: resolve the unit's SystemCallFilter= groups to x86_64
# syscall numbers (systemd-analyze of this machine, unistd_64.h), then print the command to run on the
# GPU host (tests/hardware/check_service_sandbox.py documents what is reproduced and what is not).
#   tests/hardware/run_service_sandbox.sh > args.txt   # then on the GPU host:
#   python3 tests/hardware/check_service_sandbox.py $(cat args.txt) --results OUT.json
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
header=/usr/include/x86_64-linux-gnu/asm/unistd_64.h
[ -r "$header" ] || { echo "needs $header (apt-get install linux-libc-dev)" >&2; exit 1; }
groups=$(python3 - "$root/roles/sglang_service/defaults/main.yml" <<'PY'
import sys, yaml
lines = yaml.safe_load(open(sys.argv[1]))["sglang_service_system_call_filter"]
for line in lines:
    if not line.startswith("~"):
        sys.exit(f"only deny lists (~...) are reproduced, got {line!r}")
    print(" ".join(line[1:].split()))
PY
)
for group in $groups; do
  for name in $(systemd-analyze syscall-filter "$group" | sed -n 's/^ \+\([a-z_0-9]\+\)$/\1/p'); do
    number=$(sed -n "s/^#define __NR_${name} \([0-9]\+\)$/\1/p" "$header")
    [ -n "$number" ] && printf -- '--deny %s=%s ' "$name" "$number"
  done
done
python3 - "$root/roles/sglang_service/defaults/main.yml" <<'PY'
import sys, yaml
for entry in yaml.safe_load(open(sys.argv[1]))["sglang_service_device_allow"]:
    print(f"--device-class {entry.split()[0].removeprefix('char-')}", end=" ")
PY
echo
