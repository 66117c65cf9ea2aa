#!/usr/bin/env bash
# The project's whole test run (`make test`, and CI's .ci/run). On a bare Debian machine it installs
# and starts what it needs: Docker engine, the local systemd base image, the Python venv. Then it runs
# every stage, even after a failure, prints a summary, and exits non-zero if any stage failed.
#   STAGES="lint sanity unit build molecule" scripts/test.sh   # a subset
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export PATH="$root/.venv/bin:$PATH"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 ANSIBLE_NOCOLOR=1 NO_COLOR=1
logs="$root/tests/output/logs"
mkdir -p "$logs" && rm -f "$logs"/*.log
stages=${STAGES:-"lint sanity unit build molecule"}
declare -A status elapsed
start_all=$SECONDS

run_stage() {  # run_stage NAME CMD...: output to the terminal and to tests/output/logs/NAME.log
  local name=$1; shift
  local t0=$SECONDS
  echo "=== [$name] $*"
  "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  elapsed[$name]=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then status[$name]=PASS; else status[$name]="FAIL (exit $rc)"; fi
  echo "=== [$name] ${status[$name]} in ${elapsed[$name]} s"
  return "$rc"
}

# shellcheck disable=SC2317  # invoked indirectly, through run_stage
setup() {
  command -v git >/dev/null || { echo "setup: git is required" >&2; return 1; }
  if [[ " $stages " == *" molecule "* ]]; then
    scripts/ensure-docker.sh || return 1
    if ! command -v debootstrap >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || return 1
    fi
    # Debian 12 for every scenario, Debian 13 for molecule/trixie; the two downloads overlap.
    scripts/build-base-image.sh bookworm gpufleet/debian12-systemd:latest & local bookworm_build=$!
    scripts/build-base-image.sh trixie gpufleet/debian13-systemd:latest & local trixie_build=$!
    wait "$bookworm_build" || return 1
    wait "$trixie_build" || return 1
  fi
  # llama-cpp-python (the real CPU engine of the smoke-test tests) builds from source.
  if [[ " $stages " == *" unit "* ]] && ! { command -v cmake && command -v g++; } >/dev/null 2>&1; then
    echo "setup: installing cmake and g++ for the llama-cpp-python build"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ >/dev/null || return 1
  fi
  scripts/bootstrap-venv.sh "$(command -v python3.11 || command -v python3)" .venv requirements-test.txt
}

run_stage setup setup || { echo "setup failed: nothing else can run"; exit 1; }

# The CPU engine build (about 5 min on 2 cores, cached in ~/.cache/gpufleet) overlaps lint and
# sanity; the tests that need it wait on its lock.
if [[ " $stages " == *" unit "* ]]; then
  python tests/support/llama_engine.py >"$logs/llama-engine.log" 2>&1 &
fi

for stage in $stages; do
  case $stage in
    lint)     run_stage lint scripts/lint.sh ;;
    sanity)   run_stage sanity scripts/ansible-test-sanity.sh ;;
    unit)     run_stage unit pytest -p no:cacheprovider tests/unit tests/integration ;;
    build)    run_stage build scripts/check-collection-build.sh ;;
    molecule) run_stage molecule molecule test --all ;;
    *) echo "unknown stage $stage"; status[$stage]="FAIL (unknown)";;
  esac
done

echo
echo "=================== summary ($(( (SECONDS - start_all) / 60 )) min $(( (SECONDS - start_all) % 60 )) s) ==================="
failed=0
for stage in setup $stages; do
  printf '%-9s %-16s %5s s\n' "$stage" "${status[$stage]:-not run}" "${elapsed[$stage]:-0}"
  [ "${status[$stage]:-}" = PASS ] || failed=1
done
if [ -f "$logs/molecule.log" ]; then
  echo "--- molecule scenario results"
  sed 's/\x1b\[[0-9;]*m//g' "$logs/molecule.log" | awk '/SCENARIO RECAP/{p=1; next} p && NF' | tail -n 20
  sed 's/\x1b\[[0-9;]*m//g' "$logs/molecule.log" | grep -E "Molecule executed" | tail -n 1
fi
if [ -f "$logs/unit.log" ]; then
  echo "--- pytest"
  grep -E "^=+ .*(passed|failed|error).* =+$" "$logs/unit.log" | tail -n 1
fi
exit $failed
