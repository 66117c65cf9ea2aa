#!/usr/bin/env bash
# Hardware check of gpufleet.llm_server.nvidia_driver's verification tasks (READ-ONLY: no apt, no systemd,
# no module load, no GPU setting). Runs `tasks_from: verify` twice against the loaded driver:
#   1. with the host's real branch (default 580)   -> must PASS
#   2. with a wrong branch (default 590)           -> must FAIL with the branch-mismatch message
# and prints a Markdown report (also written to $REPORT, default ./driver-verify-report.md).
#
# usage: tests/hardware/run_driver_verify.sh [GOOD_BRANCH [BAD_BRANCH [EXPECTED_GPUS]]]
#   needs ansible-playbook on PATH (e.g. pip install --no-index --find-links WHEELS ansible-core into a venv);
#   ANSIBLE_COLLECTIONS_PATH may point at a tree holding ansible_collections/gpufleet/llm_server, otherwise
#   this checkout is linked into a temporary one. PYTHON: interpreter for the modules (default: python3 on PATH).
# exit 0 when both outcomes are as expected, 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
good=${1:-580}
bad=${2:-590}
gpus=${3:-0}
report=${REPORT:-$PWD/driver-verify-report.md}
work=$(mktemp -d /tmp/gpufleet-verify.XXXXXX)
trap 'rm -rf "$work"' EXIT

python=${PYTHON:-$(command -v python3)}   # the target's Python for the modules (PYTHON=... to override)
command -v ansible-playbook >/dev/null || { echo "ansible-playbook not on PATH" >&2; exit 2; }
found=
IFS=: read -r -a cpaths <<<"${ANSIBLE_COLLECTIONS_PATH:-}"
for p in "${cpaths[@]}"; do [ -f "$p/ansible_collections/gpufleet/llm_server/galaxy.yml" ] && found=1; done
if [ -z "$found" ]; then
  mkdir -p "$work/collections/ansible_collections/gpufleet"
  ln -s "$root" "$work/collections/ansible_collections/gpufleet/llm_server"
  export ANSIBLE_COLLECTIONS_PATH="$work/collections"
fi
# Own minimal config: the repository's ansible.cfg names the production inventory and extra callbacks.
printf '[defaults]\nlocalhost_warning = false\ninterpreter_python = auto_silent\ncallback_result_format = yaml\nnocolor = true\n' >"$work/ansible.cfg"
export ANSIBLE_CONFIG="$work/ansible.cfg" ANSIBLE_LOCAL_TEMP="$work/tmp" ANSIBLE_REMOTE_TEMP="$work/tmp"

run() {  # run NAME BRANCH
  GPUFLEET_VERIFY_OUT="$work/$1.json" ansible-playbook -i localhost, "$here/verify_driver.yml" \
    -e "ansible_python_interpreter=$python" -e "nvidia_driver_branch=$2" -e "nvidia_driver_expected_gpu_count=$gpus" >"$work/$1.log" 2>&1
  echo $? >"$work/$1.rc"
}
run good "$good"
run bad "$bad"

python3 - "$work" "$good" "$bad" "$report" <<'PY'
import json, pathlib, platform, sys
work, good, bad, report = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def load(name):
    path = work / f"{name}.json"
    data = json.loads(path.read_text()) if path.exists() else {"checks": [], "gpu_info": {}, "error": "no result file"}
    data["rc"] = int((work / f"{name}.rc").read_text())
    data["log"] = (work / f"{name}.log").read_text()
    return data
g, b = load("good"), load("bad")
gi = g.get("gpu_info") or {}
lines = ["# nvidia_driver verification on real hardware", "",
         f"- host: `{platform.node()}`, kernel `{platform.release()}`, Python {platform.python_version()}",
         f"- gpu_info: source `{gi.get('source')}`, driver `{gi.get('driver_version')}`, flavour `{gi.get('module_flavor')}`, "
         f"GPUs {gi.get('gpu_count')} (PCI {gi.get('pci_gpu_count')}), kernel log `{gi.get('kernel_log_source')}`", ""]
for d in gi.get("devices", []):
    if d.get("kind") == "gpu":
        lines.append(f"- GPU `{d.get('address')}` {d.get('vendor_id')}:{d.get('device_id')} driver `{d.get('driver')}` "
                     f"cc `{d.get('compute_capability')}` {d.get('name') or ''}")
ok_good = g["rc"] == 0 and all(c["status"].strip() != "fail" for c in g["checks"]) and g["checks"]
bad_branch = [c for c in b["checks"] if c["check"] == "driver_branch"]
ok_bad = b["rc"] != 0 and bad_branch and bad_branch[0]["status"].strip() == "fail" and "Driver branch mismatch" in b["log"]
for title, data, branch, ok, want in (("expected to pass", g, good, ok_good, "pass"),
                                      ("expected to fail", b, bad, ok_bad, "fail with the branch mismatch")):
    lines += ["", f"## nvidia_driver_branch \"{branch}\" ({title}): {'as expected' if ok else 'NOT AS EXPECTED'}", "",
              f"ansible-playbook exit code {data['rc']} (want {want}).", "",
              "| check | status | detail |", "| --- | --- | --- |"]
    lines += [f"| {c['check']} | {c['status'].strip()} | {' '.join(c['detail'].split()).replace('|', '/')} |" for c in data["checks"]]
    if data["rc"] != 0:
        msg = [l.strip() for l in data["log"].splitlines() if "verification failed" in l or "Driver branch mismatch" in l]
        lines += ["", "Failure message:", "", "```", *(msg[:3] or data["log"].splitlines()[-15:]), "```"]
lines += ["", f"**Result: {'PASS' if ok_good and ok_bad else 'FAIL'}**", ""]
text = "\n".join(lines)
pathlib.Path(report).write_text(text)
print(text)
sys.exit(0 if ok_good and ok_bad else 1)
PY
