#!/usr/bin/env bash
# Create (first use) or refresh the project virtualenv with pinned packages, and link this checkout
# into .collections/ so `gpufleet.llm_server.*` resolves by FQCN (ansible.cfg's collections_path).
#   usage: bootstrap-venv.sh [PYTHON] [VENV] [REQUIREMENTS_FILE]
#          bootstrap-venv.sh --which-python   # print the interpreter a new venv would be made from
# Re-running is cheap: pip runs only when the requirements or constraints files changed.
set -euo pipefail

# The interpreter: PYTHON (the argument, else the environment) where given, else the distribution's python3 where it
# is 3.11 or newer, else python3.11 or python3 on PATH. Debian and Ubuntu build their python3 with PGO and LTO; pyenv
# and other source builds skip both unless asked (the development machine's python3 is pyenv's 3.11.7). Ansible's
# controller and task workers are Python: three role-running test files took 496 and 496 busy CPU s with pyenv's
# 3.11.7, 419 and 431 with Debian 12's 3.11.2 (issue 36, docs/testing.md).
default_python() {
  if [ -n "${PYTHON:-}" ]; then
    echo "$PYTHON"
  elif /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo /usr/bin/python3
  else
    command -v python3.11 || command -v python3
  fi
}
if [ "${1:-}" = --which-python ]; then
  default_python
  exit 0
fi
python=${1:-$(default_python)}
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
else
  # An existing venv is kept, also where another interpreter is asked for now; say so.
  made_from=$(sed -n 's/^executable = //p' "$venv/pyvenv.cfg" 2>/dev/null)
  asked=$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null || true)
  if [ -n "$made_from" ] && [ -n "$asked" ] && [ "$(realpath "$made_from" 2>/dev/null)" != "$asked" ]; then
    echo "bootstrap: $venv was made from $made_from, not $asked; remove $venv to make it again from $python"
  fi
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
