#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of this checkout laid out as
# ansible_collections/gpufleet/llm_server (ansible-test refuses any other layout, and resolves
# symlinks, so the .collections link is not enough). Files: git-tracked plus untracked-not-ignored.
#   usage: ansible-test-sanity.sh [extra ansible-test args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d /tmp/gpufleet-sanity.XXXXXX)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/gpufleet/llm_server"
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || [ -L "$f" ] || continue   # deleted but not yet staged
  printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$dest" -xf -
cd "$dest"
# ansible-test lists the collection's files through git when it is a repository.
git init -q && git add -A && git -c user.email=ci@local -c user.name=ci commit -qm sanity
# ansible-test bootstraps pip in its sanity venvs with a get-pip.py it downloads from a host these
# machines cannot reach; give it the offline stand-in (scripts/ansible-test-get-pip.py) instead.
pip_version=$(python3 - <<'PY'
import pathlib, re, ansible_test
source = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([0-9.]+)'", source.read_text()).group(1))
PY
)
# The stand-in seeds each venv's pip with this run's own pip (SEED_PIP_PYTHON) instead of ensurepip (issue 36).
get_pip_cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
seed_python=$(python3 -c 'import sys; print(sys.executable)')
get_pip=$(sed "s|^SEED_PIP_PYTHON = \"\"\$|SEED_PIP_PYTHON = \"$seed_python\"|" "$root/scripts/ansible-test-get-pip.py")
if [ "$(cat "$get_pip_cache" 2>/dev/null)" != "$get_pip" ]; then
  mkdir -p "$(dirname "$get_pip_cache")"
  printf '%s\n' "$get_pip" >"$get_pip_cache"
fi
python=$(command -v python3.11 || command -v python3)
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# --venv: ansible-test builds its own pinned virtualenvs (pylint, yamllint, ...) from PyPI, so the
# project venv stays untouched.
# Not exec: the EXIT trap must still remove the copy (an exec'd run left a /tmp/gpufleet-sanity.* behind each time).
ansible-test sanity --venv --python "$pyver" --color no "$@"
