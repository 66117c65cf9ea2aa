#!/usr/bin/env bash
# Create (first use) or refresh the project virtualenv with pinned packages, and link this checkout
# into .collections/ so `gpufleet.llm_server.*` resolves by FQCN (ansible.cfg's collections_path).
#   usage: bootstrap-venv.sh PYTHON VENV REQUIREMENTS_FILE
# Re-running is cheap: pip runs only when the requirements or constraints files changed.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
requirements=${3:-requirements.txt}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "bootstrap: $python is not Python >= 3.11 (ansible-core 2.19 needs it). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating $venv with $("$python" --version)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi

stamp="$venv/.installed-$(basename "$requirements")"
digest=$(cat "$requirements" requirements.txt constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  echo "bootstrap: installing $requirements into $venv (pinned by constraints.txt)"
  # pip byte-compiles every .py file it installs: 19,000 for requirements-test.txt (the `ansible` bundle's collections
  # most of them, though a run imports a few thousand): 47.5 CPU s against 13.8 with --no-compile (warm pip cache,
  # 2026-12-07). Compiled here, Python never compiles them again, also where PYTHONDONTWRITEBYTECODE=1 forbids it to
  # write bytecode later (the development machine exports it, and CI's times say CI does: a `make deploy` venv without
  # bytecode compiled ansible-core on every run). Under a bytecode prefix (PYTHONPYCACHEPREFIX, which scripts/test.sh
  # sets) Python reads bytecode only from the prefix and writes there what it imports: pip's files would never be read.
  compile=()
  [ -n "${PYTHONPYCACHEPREFIX:-}" ] && compile=(--no-compile)
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${compile[@]}" -r "$requirements" -c constraints.txt
  echo "$digest" >"$stamp"
fi

link=.collections/ansible_collections/gpufleet/llm_server
if [ "$(readlink "$link" 2>/dev/null)" != "$root" ]; then
  mkdir -p "$(dirname "$link")"
  ln -sfn "$root" "$link"
fi
