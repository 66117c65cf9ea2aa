"""scripts/molecule_scenarios.py: every scenario runs and is reported, whatever happens to the others.

What is under test is our runner, not Molecule: a stand-in `molecule` executable (a test double:
a real scenario takes minutes) records which scenario it was asked for and fails, passes or hangs
as each test says. The scenario list is the real one, read from molecule/*/molecule.yml, so a
scenario added to the project is covered without touching this file. The runner against real
Molecule is the `molecule` stage of `make test`.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
RUNNER = ROOT / "scripts" / "molecule_scenarios.py"
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))

STAND_IN = textwrap.dedent("""\
    import os, pathlib, sys, time
    name = sys.argv[sys.argv.index("-s") + 1]
    with open(os.environ["STANDIN_CALLS"], "a") as calls:
        calls.write(name + "\\n")
    behaviour = os.environ.get("STANDIN_" + name, "pass")
    print(f"INFO     {name} > converge", flush=True)
    if behaviour == "fail":
        print("TASK [Check the forced thing] ***", flush=True)
        print("[ERROR]: Task failed: forced failure", flush=True)
        print("fatal: [instance]: FAILED! => {\\"msg\\": \\"forced failure\\"}", flush=True)
        sys.exit(2)
    if behaviour == "hang":
        time.sleep(600)
    print("PLAY RECAP ok=3 changed=0 failed=0", flush=True)
""")


def _setup(tmp_path: pathlib.Path, behaviour: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    stand_in = tmp_path / "molecule_stand_in.py"
    stand_in.write_text(STAND_IN)
    env = dict(os.environ, STANDIN_CALLS=str(tmp_path / "calls"))
    # A lock inherited from the calling run (make test-cold beside other engineers' scenarios) would
    # make the stand-in scenarios wait for real ones: they timed out at 300 s in issue 12's cold run.
    env.pop("GPUFLEET_MOLECULE_LOCK", None)
    env.update({f"STANDIN_{name}": value for name, value in behaviour.items()})
    cmd = [sys.executable, str(RUNNER), "--log-dir", str(tmp_path / "logs"),
           "--molecule", f"{sys.executable} {stand_in}"]
    return cmd, env


def _summary(stdout: str) -> dict[str, str]:
    table = stdout.split("--- molecule scenarios", 1)[1].splitlines()[1:]
    return {line.split()[0]: line.split(None, 1)[1] for line in table if line and line.split()[0] in SCENARIOS}


def test_the_project_has_the_scenarios_the_suite_expects():
    assert len(SCENARIOS) >= 9 and "default" in SCENARIOS and SCENARIOS[0] == "default"


def test_a_failure_in_the_first_scenario_does_not_stop_the_others(tmp_path):
    cmd, env = _setup(tmp_path, {SCENARIOS[0]: "fail"})
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / "calls").read_text().split() == SCENARIOS  # each asked for once, in order
    summary = _summary(proc.stdout)
    assert set(summary) == set(SCENARIOS)
    assert summary[SCENARIOS[0]].startswith("FAIL (exit 2)")
    assert "TASK [Check the forced thing] Task failed: forced failure" in summary[SCENARIOS[0]]
    assert all(summary[name].startswith("PASS") for name in SCENARIOS[1:])
    assert f"{len(SCENARIOS)} scenarios: {len(SCENARIOS) - 1} passed, 1 failed, 0 not run" in proc.stdout
    # each scenario's own log holds its own output only
    assert "forced failure" in (tmp_path / "logs" / f"molecule-{SCENARIOS[0]}.log").read_text()
    assert "forced failure" not in (tmp_path / "logs" / f"molecule-{SCENARIOS[1]}.log").read_text()


def test_all_passing_scenarios_exit_zero(tmp_path):
    cmd, env = _setup(tmp_path, {})
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(SCENARIOS)} scenarios: {len(SCENARIOS)} passed, 0 failed, 0 not run" in proc.stdout


def test_an_interrupted_run_reports_the_scenarios_it_never_ran_as_failures(tmp_path):
    hanging = SCENARIOS[2]
    cmd, env = _setup(tmp_path, {SCENARIOS[1]: "fail", hanging: "hang"})
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    calls = tmp_path / "calls"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and hanging not in (calls.read_text().split() if calls.exists() else []):
        time.sleep(0.1)
    time.sleep(0.5)  # the stand-in is in its sleep
    proc.send_signal(signal.SIGTERM)
    stdout = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, stdout
    summary = _summary(stdout)
    assert set(summary) == set(SCENARIOS)
    assert summary[SCENARIOS[0]].startswith("PASS")
    assert summary[SCENARIOS[1]].startswith("FAIL")
    assert summary[hanging].startswith("INTERRUPTED")
    assert all(summary[name].startswith("NOT RUN") for name in SCENARIOS[3:])
    not_run = len(SCENARIOS) - 3
    assert f"{len(SCENARIOS)} scenarios: 1 passed, 2 failed, {not_run} not run" in stdout
    assert calls.read_text().split() == SCENARIOS[:3]


def test_an_unknown_scenario_name_is_refused_before_anything_runs(tmp_path):
    cmd, env = _setup(tmp_path, {})
    proc = subprocess.run([*cmd, "defualt"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "defualt" in proc.stderr and "default" in proc.stderr
    assert not (tmp_path / "calls").exists()
