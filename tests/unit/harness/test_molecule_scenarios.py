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
import re
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
    started = time.time()
    print(f"INFO     {name} > converge", flush=True)
    if behaviour.startswith("sleep:"):
        time.sleep(float(behaviour.split(":")[1]))
        print(f"{name} line 2", flush=True)
    if behaviour.startswith("gate:"):  # until the test creates the file (at most 120 s)
        gate, until = pathlib.Path(behaviour.split(":", 1)[1]), time.monotonic() + 120
        while not gate.exists() and time.monotonic() < until:
            time.sleep(0.05)
        print(f"{name} line 2", flush=True)
    if os.environ.get("STANDIN_TIMES"):
        with open(os.environ["STANDIN_TIMES"], "a") as times:
            times.write(f"{name} {started} {time.time()}\\n")
    if behaviour == "fail":
        print("TASK [Check the forced thing] ***", flush=True)
        print("[ERROR]: Task failed: forced failure", flush=True)
        print("fatal: [instance]: FAILED! => {\\"msg\\": \\"forced failure\\"}", flush=True)
        sys.exit(2)
    if behaviour == "env":
        pathlib.Path(os.environ["STANDIN_ENV"]).write_text(
            os.environ.get("PYTHONPATH", "") + "\\n" + os.environ.get("GPUFLEET_ANSIBALLZ_CODE_CACHE", "") + "\\n")
    if behaviour == "hang":
        time.sleep(600)
    if behaviour == "profile":  # the lines of a real run (molecule-nvidia_driver.log of 2026-12-06), with known pauses
        print(f"INFO     [{name} > converge] Executing", flush=True)
        print("PLAY [Converge] " + "*" * 20, flush=True)
        print("TASK [A slow task] " + "*" * 20, flush=True)
        # 1 s and 0.9 s above the lower bounds the test asserts (1.4 and 0.5): the runner stamps a line when it reads
        # it, and a busy machine can read the TASK line late and the next one on time (helper audit, 2026-12-07).
        time.sleep(2.4)
        print("ok: [instance]", flush=True)
        print("TASK [gpufleet.llm_server.nvidia_driver : A quick task] " + "*" * 20, flush=True)
        print("ok: [instance]", flush=True)
        print(f"INFO     [{name} > converge] Executed: Successful", flush=True)
        print(f"INFO     [{name} > verify] Executing", flush=True)
        print("RUNNING HANDLER [Restart it] " + "*" * 20, flush=True)
        time.sleep(1.4)
        print(f"INFO     [{name} > verify] Executed: Successful", flush=True)
    print("PLAY RECAP ok=3 changed=0 failed=0", flush=True)
""")


def _setup(tmp_path: pathlib.Path, behaviour: dict[str, str], *, jobs: int = 1) -> tuple[list[str], dict[str, str]]:
    stand_in = tmp_path / "molecule_stand_in.py"
    stand_in.write_text(STAND_IN)
    env = dict(os.environ, STANDIN_CALLS=str(tmp_path / "calls"))
    # A lock inherited from the calling run (make test-cold beside other engineers' scenarios) would
    # make the stand-in scenarios wait for real ones: they timed out at 300 s in issue 12's cold run.
    env.pop("GPUFLEET_MOLECULE_LOCK", None)
    # The runner holds each scenario's ports in the tests' port-lock folder (tests/support/ports.py): its own,
    # or these stand-ins would wait for the real scenarios that `make test` runs beside the unit stage.
    env["GPUFLEET_PORT_LOCKS"] = str(tmp_path / "port-locks")
    env.update({f"STANDIN_{name}": value for name, value in behaviour.items()})
    cmd = [sys.executable, str(RUNNER), "--log-dir", str(tmp_path / "logs"),
           "--molecule", f"{sys.executable} {stand_in}", "--jobs", str(jobs)]
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


# --jobs: scenarios at once (issue 36). What two scenarios must not share is read from the real scenario files.

def _intervals(path: pathlib.Path) -> dict[str, tuple[float, float]]:
    return {name: (float(start), float(end)) for name, start, end in
            (line.split() for line in path.read_text().splitlines())}


def test_scenarios_that_share_a_loopback_port_are_known_to_collide():
    """The facts behind the schedule, from the files themselves: default and preflight both serve on 30001
    (their group_vars), trixie runs default's playbooks and group_vars; nvidia_driver's repositories are
    on 33000-33002 and multinode uses Docker's bridge network ports 32140/32150, apart from fleet's 321xx."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import molecule_scenarios  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    res = {name: molecule_scenarios.scenario_resources(ROOT, name) for name in SCENARIOS}
    assert "port-30001" in res["default"] & res["preflight"] & res["trixie"]
    assert res["default"] - {"scenario-default"} <= res["trixie"]
    assert not res["default"] & res["nvidia_driver"]
    assert not res["fleet"] & res["multinode"]
    assert {"port-33000", "port-33001", "port-33002"} <= res["nvidia_driver"]
    assert all(f"scenario-{name}" in res[name] for name in SCENARIOS)


def test_two_jobs_overlap_scenarios_but_never_two_that_share_a_port(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import molecule_scenarios  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    cmd, env = _setup(tmp_path, {name: "sleep:1.5" for name in SCENARIOS}, jobs=2)
    env["STANDIN_TIMES"] = str(tmp_path / "times")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((tmp_path / "calls").read_text().split()) == SCENARIOS  # each once
    times = _intervals(tmp_path / "times")
    overlapping = {(a, b) for a in SCENARIOS for b in SCENARIOS
                   if a < b and times[a][0] < times[b][1] and times[b][0] < times[a][1]}
    assert overlapping, times  # two ran at once
    for a, b in overlapping:
        shared = (molecule_scenarios.scenario_resources(ROOT, a) & molecule_scenarios.scenario_resources(ROOT, b))
        assert not shared, f"{a} and {b} ran at once, sharing {shared}"
    assert not any(a == b for a, b in overlapping)
    # the terminal shows whose line it is; each log holds its own scenario's lines only
    assert f"{SCENARIOS[0]} | {SCENARIOS[0]} line 2" in proc.stdout
    for name in SCENARIOS:
        log = (tmp_path / "logs" / f"molecule-{name}.log").read_text()
        assert f"{name} line 2" in log and " | " not in log
        assert not any(f"{other} line 2" in log for other in SCENARIOS if other != name)
    assert "up to 2 at once" in proc.stdout


def test_two_runs_on_one_lock_take_turns_on_a_scenario_and_wait_for_a_plain_flock(tmp_path):
    """Two checkouts on one Docker engine: the same scenario of another run, or a `flock LOCK molecule ...` by
    hand (exclusive on the lock file), makes this run wait; the wait is said and not counted as the scenario's."""
    lock = tmp_path / "molecule.lock"
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    runs = []
    gate = tmp_path / "first-may-end"
    # The first run's `default` lasts until the second run has said that it waits (a fixed 3 s could end before a
    # busy machine had started the second runner: helper audit, 2026-12-07); then the gate ends it.
    for folder, behaviour in ((first_dir, f"gate:{gate}"), (second_dir, "sleep:1")):
        cmd, env = _setup(folder, {"default": behaviour}, jobs=2)
        env.update(GPUFLEET_MOLECULE_LOCK=str(lock), STANDIN_TIMES=str(tmp_path / "times"))
        runs.append((cmd, env))
    first = subprocess.Popen([*runs[0][0], "default"], env=runs[0][1], stdout=subprocess.PIPE, text=True)
    calls = first_dir / "calls"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not calls.exists():
        time.sleep(0.05)
    second = subprocess.Popen([*runs[1][0], "default", "nvidia_driver"], env=runs[1][1], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    said = []
    for line in second.stdout:  # the wait is said while the first run still holds `default`
        said.append(line)
        if "default: waiting for another run's scenario" in line:
            break
    gate.touch()
    second_stdout = "".join(said) + second.communicate(timeout=120)[0]
    assert first.wait(timeout=60) == 0 and second.returncode == 0, second_stdout
    assert "default: waiting for another run's scenario" in second_stdout
    lines = [line.split() for line in (tmp_path / "times").read_text().splitlines()]
    defaults = [(float(start), float(end)) for name, start, end in lines if name == "default"]
    assert len(defaults) == 2 and defaults[1][0] >= defaults[0][1], lines  # the second waited for the first
    # a plain exclusive flock on the lock file (a scenario run by hand, an older runner) holds every scenario back
    import fcntl  # pylint: disable=import-outside-toplevel
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen([*runs[1][0], "preflight"], env=runs[1][1], stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        assert waiting.poll() is None
        fcntl.flock(held, fcntl.LOCK_UN)
    assert waiting.wait(timeout=60) == 0


def test_a_scenario_and_the_tests_port_pool_never_hand_out_the_same_port(tmp_path, monkeypatch):
    """`make test` runs the scenarios beside the unit stage: a scenario waits while a test holds one of its ports
    (as smoke_rollback's stand-in server on 30250 lies inside the smoke tests' pool), and the pool skips the port
    while the scenario runs. The pool is the real tests/support/ports.py, pointed at the runner's lock folder; the
    scenario is a one-file project of its own on a port nothing else uses (33990), so a real scenario running on
    this machine cannot disturb the test."""
    from support import ports  # pylint: disable=import-outside-toplevel

    project = tmp_path / "project"
    (project / "molecule" / "probe").mkdir(parents=True)
    (project / "molecule" / "probe" / "molecule.yml").write_text("# its stand-in server: 127.0.0.1:33990\n")
    cmd, env = _setup(tmp_path, {"probe": "sleep:3"})
    monkeypatch.setattr(ports, "LOCKS", pathlib.Path(env["GPUFLEET_PORT_LOCKS"]))
    pool = ports.PortPool(range(33990, 33992))
    assert pool.take() == 33990
    runner = subprocess.Popen([*cmd, "--project", str(project), "probe"], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(2)
    assert runner.poll() is None and not (tmp_path / "calls").exists()  # waiting for the test's port
    pool.release(33990)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "calls").exists():
        time.sleep(0.05)
    assert (tmp_path / "calls").read_text().split() == ["probe"]
    assert pool.take() == 33991  # the scenario holds 33990 while it runs
    pool.release(33991)
    out = runner.communicate(timeout=60)[0]
    assert runner.returncode == 0, out
    assert "probe: waiting for another run's scenario on the same container or ports, or a test holding" in out
    assert pool.take() == 33990  # handed back when the scenario ended
    pool.release(33990)


def test_an_interrupted_parallel_run_stops_every_scenario_in_progress(tmp_path):
    cmd, env = _setup(tmp_path, {name: "hang" for name in SCENARIOS}, jobs=2)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    calls = tmp_path / "calls"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(calls.read_text().split() if calls.exists() else []) < 2:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    stdout = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, stdout
    summary = _summary(stdout)
    started = calls.read_text().split()
    assert len(started) == 2
    assert all(summary[name].startswith("INTERRUPTED") for name in started)
    assert all(summary[name].startswith("NOT RUN") for name in SCENARIOS if name not in started)
    # no stand-in left running
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "molecule_stand_in.py")], capture_output=True,
                              text=True, check=False)
    assert leftover.stdout.strip() == ""


def test_each_scenario_gets_a_profile_of_its_steps_and_tasks_and_the_summary_names_the_slowest(tmp_path):
    profiled = SCENARIOS[1]
    cmd, env = _setup(tmp_path, {profiled: "profile"})
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split("\t") for line in (tmp_path / "logs" / f"molecule-{profiled}.times").read_text().splitlines()
            if not line.startswith("#")]
    took = {row[3]: float(row[1]) for row in rows}
    assert 1.4 <= took["TASK [A slow task]"] < 5, rows
    assert took["TASK [gpufleet.llm_server.nvidia_driver : A quick task]"] < 1, rows
    assert 0.5 <= took["RUNNING HANDLER [Restart it]"] < 5, rows
    assert [row[2] for row in rows if row[3] == "TASK [A slow task]"] == ["converge"]
    steps = proc.stdout.split("--- molecule steps (s)", 1)[1].split("--- slowest", 1)[0]
    # Only scenarios with steps; each step's seconds as the runner saw its lines arrive: a busy machine delays the
    # first line more than the last (cold run of 26492a2 beside the unit stage's other workers: converge 1, not 2).
    found = re.fullmatch(rf"\s*{profiled}:\s+converge (\d+), verify (\d+)\s*", steps)
    assert found and 1 <= int(found[1]) <= 5 and int(found[2]) <= 5, steps
    slowest = proc.stdout.split("--- slowest Molecule tasks", 1)[1].splitlines()[1]
    assert slowest.endswith(f"{profiled} > converge: TASK [A slow task]"), proc.stdout
    # the table of results is still read as before: one PASS per scenario, and it comes after the profile, at the end
    # of the output, where CI's tail of a run shows it
    assert all(value.startswith("PASS") for value in _summary(proc.stdout).values())
    assert proc.stdout.index("--- slowest Molecule tasks") < proc.stdout.index("--- molecule scenarios"), proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith(f"molecule: {len(SCENARIOS)} scenarios: "), proc.stdout


def test_scenarios_run_with_the_payload_code_cache_and_keep_the_caller_s_pythonpath(tmp_path):
    scenario = SCENARIOS[0]
    cmd, env = _setup(tmp_path, {scenario: "env"})
    env.update(STANDIN_ENV=str(tmp_path / "env.txt"), PYTHONPATH="/caller/site")
    proc = subprocess.run(cmd + [scenario], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pythonpath, cache = (tmp_path / "env.txt").read_text().splitlines()
    assert pythonpath.split(os.pathsep) == [str(ROOT / "tests" / "support" / "ansiballz_code_cache"), "/caller/site"]
    assert cache == str(ROOT / "tests" / "output" / "ansiballz-code")
