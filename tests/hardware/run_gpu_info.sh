#!/usr/bin/env bash
# Run gpufleet.llm_server.gpu_info for real on the GPU test host and check the H200 facts.
# READ-ONLY: only gpu_info runs (sysfs/procfs reads, NVML queries, `nvidia-smi --query-*`, the
# kernel log); it never binds/unbinds a device, loads a module or changes a GPU setting.
#
#   usage (from the repository root):
#     tests/hardware/run_gpu_info.sh [--wheels DIR] [--expect-address ADDR] [--expect-cc X.Y] [--min-memory-gib N]
#
# Ansible: an `ansible-playbook` already importable by python3 is used as is; otherwise --wheels DIR
# (or $GPUFLEET_WHEELS) must hold ansible-core and its dependencies as wheels for this Python
# (no network needed): they are installed with pip --target into a throw-away folder on PYTHONPATH, so the
# host's pynvml (nvidia-ml-py) stays importable for the NVML probe.
# Output: a Markdown report on stdout (commit it to docs/hardware-validation.md); exit 0 when every
# check passed, 1 when one failed, 2 when the run itself could not happen.
set -euo pipefail
export LC_ALL=${LC_ALL:-C.UTF-8}  # ansible-core refuses a non-UTF-8 locale

root=$(cd "$(dirname "$0")/../.." && pwd)
invocation="tests/hardware/run_gpu_info.sh${*:+ $*}"
wheels=${GPUFLEET_WHEELS:-}
checks=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) wheels=$2; shift 2 ;;
    --expect-address|--expect-cc|--min-memory-gib) checks+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run_gpu_info.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "run_gpu_info.sh: $python is missing or older than 3.11; set PYTHON=/path/to/python3" >&2
  exit 2
fi

work=$(mktemp -d /tmp/gpufleet-hw.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out" "$work/collections/ansible_collections/gpufleet"
ln -s "$root" "$work/collections/ansible_collections/gpufleet/llm_server"

if command -v ansible-playbook >/dev/null 2>&1 && "$(dirname "$(command -v ansible-playbook)")/python" -c 'import ansible' 2>/dev/null; then
  bindir=$(dirname "$(command -v ansible-playbook)")
  module_python=$bindir/python
  ansible_from="existing $(command -v ansible-playbook)"
elif [ -n "$wheels" ]; then
  if [ ! -d "$wheels" ]; then
    echo "run_gpu_info.sh: --wheels $wheels is not a directory" >&2
    exit 2
  fi
  # --target + PYTHONPATH, not a venv: on a host whose python3 is itself a venv (the GPU test
  # host's is /opt/torch/.venv), a --system-site-packages venv would not see that venv's pynvml.
  if ! "$python" -m pip install -q --no-index --find-links "$wheels" --target "$work/site" ansible-core >&2; then
    echo "run_gpu_info.sh: installing ansible-core from $wheels failed (are all its dependencies there, built for $("$python" --version)?)" >&2
    exit 2
  fi
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
  bindir=$work/site/bin
  module_python=$(command -v "$python")
  ansible_from="wheels in $wheels"
else
  echo "run_gpu_info.sh: no ansible-playbook found and no --wheels DIR given." >&2
  echo "  Download ansible-core and its dependencies as wheels elsewhere (see docs/gpu-passthrough.md) and pass --wheels DIR." >&2
  exit 2
fi

printf "[defaults]\nstdout_callback = ansible.builtin.default\n" >"$work/ansible.cfg"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
set +e
ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_CONFIG="$work/ansible.cfg" ANSIBLE_NOCOLOR=1 \
ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false \
  "$bindir/ansible-playbook" -i localhost, "$root/tests/hardware/gpu_info_probe.yml" \
  -e "hw_out_dir=$work/out" -e "ansible_python_interpreter=$module_python" >"$work/ansible.log" 2>&1
rc=$?
set -e
if [ ! -s "$work/out/auto.json" ]; then
  echo "run_gpu_info.sh: ansible-playbook produced no result (rc=$rc); its output:" >&2
  cat "$work/ansible.log" >&2
  exit 2
fi
version=$("$bindir/ansible-playbook" --version 2>/dev/null || true)
version=${version%%$'\n'*}
"$module_python" "$root/tests/hardware/check_gpu_info.py" --results "$work/out" --started "$started" \
  --command "$invocation" --ansible "$ansible_from ($version)" \
  "${checks[@]}"
