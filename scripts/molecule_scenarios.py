"""Run every Molecule scenario, each to its end even after another failed, and report them all.

`molecule test --all` stops at the first failing scenario and its report does not name the
scenarios it never ran: a failure in `default` hid the other 8 (issue 12). This runs
`molecule test -s NAME` once per scenario (every folder under molecule/ with a molecule.yml, in
name order, or the names given), writes each one's output to LOG_DIR/molecule-NAME.log as well as
to the terminal, and ends with one line per scenario: PASS, FAIL (with the first failed task),
INTERRUPTED or NOT RUN. Anything but PASS fails the run (exit 1); an interrupted run (SIGINT or
SIGTERM) stops the scenario in progress, still prints the summary, and exits 130 or 143.

Several checkouts on one Docker engine (worktrees, `make test-cold` beside a normal run) would
start containers of the same names: with GPUFLEET_MOLECULE_LOCK=/path each scenario runs under an
exclusive flock on that file, so scenarios of different runs take turns instead of colliding.

    python scripts/molecule_scenarios.py [--log-dir DIR] [--molecule CMD] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TASK_HEADER = re.compile(r"^TASK \[(?P<name>.*)\]")
ANSIBLE_ERROR = re.compile(r"^\[ERROR\]: (?P<msg>.*)")
FAILED_HOST = re.compile(r"^(?:fatal|failed): \[[^\]]+\]")
MOLECULE_ERROR = re.compile(r"^(?:ERROR|CRITICAL)\b|Traceback \(most recent call last\)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def discover(project: pathlib.Path) -> list[str]:
    return sorted(p.parent.name for p in (project / "molecule").glob("*/molecule.yml"))


def first_failure(log: pathlib.Path) -> str:
    """What failed first, for the summary: the failed task and Ansible's error, else Molecule's own error."""
    task = ansible_error = ""
    molecule_error = ""
    with open(log, errors="replace") as lines:
        for line in lines:
            line = ANSI.sub("", line).strip().lstrip("│").strip()
            if header := TASK_HEADER.match(line):
                task, ansible_error = header.group("name"), ""
            elif error := ANSIBLE_ERROR.match(line):
                ansible_error = error.group("msg")
            elif FAILED_HOST.match(line):
                return f"TASK [{task}] {ansible_error or line}"[:240]
            elif not molecule_error and MOLECULE_ERROR.search(line):
                molecule_error = line
    return molecule_error[:240]


@contextlib.contextmanager
def scenario_lock():
    path = os.environ.get("GPUFLEET_MOLECULE_LOCK")
    if not path:
        yield
        return
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_scenario(molecule: list[str], name: str, log_path: pathlib.Path, project: pathlib.Path) -> tuple[int, float]:
    """molecule test -s NAME, output teed to the terminal and log_path; its own process group.

    Returns the exit status and the seconds it ran (not counting a wait for the lock)."""
    with scenario_lock(), open(log_path, "w") as log:
        started = time.monotonic()
        proc = subprocess.Popen([*molecule, "test", "-s", name], cwd=project, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            assert proc.stdout is not None
            for chunk in iter(proc.stdout.readline, b""):
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
                log.write(chunk.decode(errors="replace"))
                log.flush()
            return proc.wait(), time.monotonic() - started
        except Interrupted:
            # Stop molecule and the ansible-playbook it runs (same process group), then report.
            for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=grace)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: every molecule/*/molecule.yml)")
    parser.add_argument("--log-dir", type=pathlib.Path, default=ROOT / "tests" / "output" / "logs")
    parser.add_argument("--molecule", default="molecule", help="the molecule command (default: %(default)s)")
    parser.add_argument("--project", type=pathlib.Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    known = discover(args.project)
    scenarios = args.scenarios or known
    unknown = [name for name in scenarios if name not in known]
    if unknown:
        print(f"molecule: unknown scenario(s) {unknown}; known: {known}", file=sys.stderr)
        return 2
    args.log_dir.mkdir(parents=True, exist_ok=True)

    def on_signal(signum, _frame):
        raise Interrupted(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)

    results: dict[str, tuple[str, float, str]] = {}
    interrupted: Interrupted | None = None
    started_all = started = time.monotonic()
    current = None
    try:
        for index, name in enumerate(scenarios, 1):
            current, started = name, time.monotonic()
            log_path = args.log_dir / f"molecule-{name}.log"
            print(f"=== [molecule {index}/{len(scenarios)}] {name}", flush=True)
            rc, took = run_scenario(shlex.split(args.molecule), name, log_path, args.project)
            results[name] = ("PASS", took, "") if rc == 0 else (f"FAIL (exit {rc})", took, first_failure(log_path))
            print(f"=== [molecule {index}/{len(scenarios)}] {name}: {results[name][0]} in {took:.0f} s", flush=True)
    except Interrupted as exc:
        interrupted = exc
        if current is not None and current not in results:
            results[current] = ("INTERRUPTED", time.monotonic() - started, f"by {exc}")

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    counts = {"passed": 0, "failed": 0, "not run": 0}
    print(f"--- molecule scenarios ({time.monotonic() - started_all:.0f} s)")
    for name in scenarios:
        status, took, detail = results.get(name, ("NOT RUN", 0.0, ""))
        key = "passed" if status == "PASS" else "not run" if status == "NOT RUN" else "failed"
        counts[key] += 1
        print(f"{name:<16} {status:<16} {took:5.0f} s  {detail}".rstrip())
    print(f"molecule: {len(scenarios)} scenarios: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['not run']} not run", flush=True)
    if interrupted is not None:
        return 128 + interrupted.signum
    return 0 if counts["passed"] == len(scenarios) else 1


if __name__ == "__main__":
    sys.exit(main())
