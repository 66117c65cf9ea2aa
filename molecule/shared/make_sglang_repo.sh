#!/bin/sh
# Build a local stand-in of SGLang's git repository from a real release sdist, laid out like the
# upstream repo (python/pyproject.toml, python/sglang/...): commit 1 is the release, tagged
# v<VERSION>; commit 2 on main changes a file outside the patch targets. Prints both commits.
#   usage: make_sglang_repo.sh SDIST VERSION REPO_DIR
set -eu
sdist=$1 version=$2 repo=$3
if [ -d "$repo/.git" ]; then
  git -C "$repo" rev-parse "v$version" main
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
git init -q -b main
git config user.email molecule@localhost
git config user.name molecule
git add -A
git commit -qm "SGLang $version (from the PyPI sdist)"
git tag -a "v$version" -m "v$version"
echo "# test change after v$version" >> python/sglang/README.md
git commit -qam "Second commit: change python/sglang/README.md"
git rev-parse "v$version^{commit}" main
