#!/usr/bin/env bash
# Build the collection tarball, install it into an empty collections path and list its modules
# with ansible-doc: proves the artifact users install is complete (not just the checkout).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d /tmp/gpufleet-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
ansible-galaxy collection build --force --output-path "$work/dist" .
tarball=$(ls "$work"/dist/gpufleet-llm_server-*.tar.gz)
echo "built: $(basename "$tarball") ($(du -h "$tarball" | cut -f1))"
# The artifact holds what a user of the installed collection needs (galaxy.yml build_ignore keeps the
# rest out): only these top-level entries, each of them present, and nothing of the development tree.
shipped_top="plugins roles playbooks docs meta changelogs README.md LICENSE MANIFEST.json FILES.json"
entries=$(tar tzf "$tarball")
echo "tarball entries: $(wc -l <<<"$entries")"
bad=0
while IFS= read -r entry; do
  top=${entry%%/*}
  if [[ " $shipped_top " != *" $top "* ]]; then
    echo "not for users, in the tarball: $entry (galaxy.yml build_ignore)" >&2; bad=1; continue
  fi
  case "/$entry" in
    */tests/* | */tests | */molecule/* | */molecule | */scripts/* | */scripts | */benchmarks/* | */benchmarks \
      | */.ci/* | */.ci | */__pycache__/* | *.pyc | */Makefile | */requirements-test.txt | */constraints.txt \
      | */.ansible-lint | */.yamllint | */ansible.cfg)
      echo "development file in the tarball: $entry" >&2; bad=1 ;;
  esac
done <<<"$entries"
for top in $shipped_top; do
  grep -qE "^$top(/|\$)" <<<"$entries" || { echo "missing from the tarball: $top" >&2; bad=1; }
done
[ "$bad" -eq 0 ] || exit 1
# Only the freshly installed copy may be visible: not the checkout link of ./ansible.cfg, not the
# collections bundled in the venv's site-packages.
printf '[defaults]\ncollections_path = %s\ncollections_scan_sys_path = false\n' "$work/collections" >"$work/ansible.cfg"
export ANSIBLE_CONFIG="$work/ansible.cfg"
(cd "$work" && ansible-galaxy collection install --offline --force -p "$work/collections" "$tarball")
listing=$(cd "$work" && ansible-doc -t module -l gpufleet.llm_server)
echo "$listing"
expected=""
for path in plugins/modules/*.py; do
  name=$(basename "$path" .py)
  [ -e "$path" ] && [ "$name" != __init__ ] && expected="$expected $name"
done
missing=0
for m in $expected; do
  grep -q "^gpufleet.llm_server.$m " <<<"$listing" || { echo "missing from ansible-doc -l: $m" >&2; missing=1; }
done
roles=""
for path in roles/*/; do roles="$roles $(basename "$path")"; done
for r in $roles; do
  [ -f "$work/collections/ansible_collections/gpufleet/llm_server/roles/$r/meta/argument_specs.yml" ] \
    || { echo "role $r not in the installed collection (or has no argument_specs)" >&2; missing=1; }
done
echo "modules: $(wc -w <<<"$expected"), roles: $(wc -w <<<"$roles")"
exit $missing
