#!/bin/sh
# Build the stand-in SGLang git repository on a Molecule instance, from a real release sdist, laid
# out like the upstream repo (python/pyproject.toml, python/sglang/...). What is real: the whole
# release tree (setuptools-scm versioning from tags, package layout, flag definitions in
# srt/server_args.py, the SM120 patch targets). What is a test double (documented in
# tests/support/standin_sglang/README.md): sglang/__init__.py and sglang/launch_server.py are the
# stand-in server (the real engine needs GPUs), srt/entrypoints/http_server.py is replaced by a
# module that imports what the pyproject declares, and [project].dependencies declares small real
# PyPI projects plus torch==2.9.1 (the torch stand-in) instead of SGLang's GPU stack.
#   commit 1  v<VERSION>          good
#   commit 2  v<VERSION>-bad tag  DEFAULT_MODE = "nan": the stand-in answers like SGLang with NaN logits
#   commit 3  main, tag of commit 1's version with post+2: good again
# Prints the three commits. usage: make_standin_repo.sh SDIST VERSION STANDIN_DIR REPO_DIR
set -eu
sdist=$1 version=$2 standin=$3 repo=$4
bad="v$version.bad" good="v$version.good"
case $version in
  *.post*) base=${version%.post*} post=${version##*.post}; bad="v$base.post$((post + 1))" good="v$base.post$((post + 2))" ;;
esac
if [ -d "$repo/.git" ]; then
  git -C "$repo" rev-parse "v$version^{commit}" "$bad^{commit}" main
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$sdist"
mkdir -p "$repo"
mv "$work/sglang-$version" "$repo/python"
cd "$repo"
# sdist-only artefacts that the upstream repo does not track
rm -rf python/PKG-INFO python/setup.cfg python/sglang.egg-info python/sglang/_version.py
printf '%s\n' 'python/sglang/_version.py' '*.egg-info/' '__pycache__/' > .gitignore
cp "$standin/__init__.py" python/sglang/__init__.py
cp "$standin/launch_server.py" python/sglang/launch_server.py
cat > python/sglang/srt/entrypoints/http_server.py <<'PY'
"""gpufleet stand-in (TEST DOUBLE) for SGLang's HTTP server module, in the stand-in repository.

The real module needs torch, CUDA and the rest of SGLang's stack; this one imports what the
repository's pyproject.toml declares, so an environment that lacks a declared dependency fails the
build's import check (sglang_build_verify_modules) exactly where the real module would.
"""

import dateutil  # noqa: F401  (python-dateutil)
import idna  # noqa: F401
import torch  # noqa: F401  (the torch stand-in, tests/support/standin_torch)
PY
python3 - <<'PY'
import pathlib, re
path = pathlib.Path("python/pyproject.toml")
text = path.read_text()
new = ('dependencies = [\n'
       '  # gpufleet stand-in repository: small real PyPI projects and the torch stand-in instead of the GPU stack\n'
       '  "python-dateutil>=2.8",\n  "idna>=3",\n  "torch==2.9.1",\n  "decord2 ; platform_machine == \'aarch64\'",\n]\n')
text, count = re.subn(r"(?ms)^dependencies = \[\n.*?^\]\n", new, text, count=1)
assert count == 1, "no [project].dependencies block in python/pyproject.toml"
path.write_text(text)
PY
git init -q -b main
git config user.email molecule@localhost
git config user.name molecule
git add -A
git commit -qm "SGLang $version (from the PyPI sdist) with the gpufleet stand-in server"
git tag -a "v$version" -m "v$version"
sed -i 's/^DEFAULT_MODE = "ok"$/DEFAULT_MODE = "nan"/' python/sglang/launch_server.py
grep -q '^DEFAULT_MODE = "nan"$' python/sglang/launch_server.py
git commit -qam "Bad commit: the server answers with NaN logits"
git tag -a "$bad" -m "$bad"
sed -i 's/^DEFAULT_MODE = "nan"$/DEFAULT_MODE = "ok"/' python/sglang/launch_server.py
echo "# test change after $bad" >> python/sglang/README.md
git commit -qam "Good again"
git tag -a "$good" -m "$good"
git rev-parse "v$version^{commit}" "$bad^{commit}" main
