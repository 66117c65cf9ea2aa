"""Benchmark (not a timed test): no-op re-converge of sglang_service vs a play of the same task count
doing only no-ops, plus the restart counts of a no-op run.

Needs a converged Molecule instance: `molecule converge -s sglang_service` (leave it up), then
    .venv/bin/python benchmarks/noop_converge.py [--runs 3]
It reuses Molecule's generated inventory (docker connection to the `sglang-service` container).
"""

import argparse
import glob
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
UNIT = "sglang-standin-a.service"


def inventory():
    found = sorted(glob.glob(os.path.expanduser("~/.ansible/tmp/molecule.*.sglang_service/inventory")),
                   key=os.path.getmtime)
    if not found:
        sys.exit("no Molecule inventory for sglang_service: run `molecule converge -s sglang_service` first")
    return found[-1]


def env():
    e = dict(os.environ)
    e.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
             ANSIBLE_FORCE_COLOR="0")
    bin_dir = str(pathlib.Path(sys.executable).parent)
    e["PATH"] = bin_dir + os.pathsep + e.get("PATH", "")
    return e


def play(inv, playbook):
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", inv, str(playbook)], env=env(), capture_output=True, text=True,
                          cwd=ROOT, check=False)
    took = time.monotonic() - start
    if proc.returncode:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-2000:])
    recap = re.search(r"ok=(\d+)\s+changed=(\d+).*?skipped=(\d+)", proc.stdout, re.S)
    return took, tuple(int(x) for x in recap.groups())


def unit_state(inv):
    proc = subprocess.run(["docker", "exec", "sglang-service", "systemctl", "show", "-p", "InvocationID",
                           "-p", "NRestarts", UNIT], capture_output=True, text=True, check=True)
    starts = subprocess.run(["docker", "exec", "sglang-service", "wc", "-l", "/var/lib/gpufleet-test/starts.log"],
                            capture_output=True, text=True, check=True).stdout.split()[0]
    return proc.stdout.strip().replace("\n", " "), int(starts)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    inv = inventory()
    converge = ROOT / "molecule" / "sglang_service" / "converge.yml"
    before = unit_state(inv)
    times, recap = [], None
    for _run in range(args.runs):
        took, recap = play(inv, converge)
        times.append(took)
    after = unit_state(inv)
    tasks = recap[0] + recap[2]
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as handle:
        handle.write("---\n- name: No-op baseline\n  hosts: llm_servers\n  gather_facts: false\n  tasks:\n")
        for i in range(tasks):
            handle.write(f"    - name: No-op {i}\n      ansible.builtin.ping:\n")
        baseline_book = handle.name
    base = [play(inv, baseline_book)[0] for _run in range(args.runs)]
    os.unlink(baseline_book)
    print(f"no-op re-converge of sglang_service: {min(times):.1f} s best / {sum(times) / len(times):.1f} s mean "
          f"over {args.runs} runs (ok={recap[0]} changed={recap[1]} skipped={recap[2]})")
    print(f"baseline play, {tasks} ping tasks:     {min(base):.1f} s best / {sum(base) / len(base):.1f} s mean")
    print(f"overhead factor (best/best): {min(times) / min(base):.2f}")
    print(f"restarts during the no-op runs: {after[1] - before[1]} (unit {before[0]} -> {after[0]})")


if __name__ == "__main__":
    main()
