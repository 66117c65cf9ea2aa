"""Run every Molecule scenario, each to its end even after another failed, and report them all.

`molecule test --all` stops at the first failing scenario and its report does not name the
scenarios it never ran: a failure in `default` hid the other 8 (issue 12). This runs
`molecule test -s NAME` once per scenario (every folder under molecule/ with a molecule.yml, or the
names given), writes each one's output to LOG_DIR/molecule-NAME.log as well as to the terminal, and
ends with one line per scenario: PASS, FAIL (with the first failed task), INTERRUPTED or NOT RUN.
Anything but PASS fails the run (exit 1); an interrupted run (SIGINT or SIGTERM) stops the
scenarios in progress, still prints the summary, and exits 130 or 143.

--jobs N runs up to N scenarios at once (issue 36: a scenario keeps one of the 2 cores busy, Ansible
being one task at a time). With N > 1 the longest scenarios start first (DURATION_HINTS) and each
output line on the terminal is prefixed with its scenario's name; the log files stay whole. Two
scenarios that use the same loopback port (containers with `network_mode: host` share the host's
loopback) never run at the same time: the ports are read from the scenario's files and from the
files of the scenarios it borrows from (`../default/converge.yml`), see `scenario_resources`.

Several checkouts on one Docker engine (worktrees, `make test-cold` beside a normal run) would start
containers of the same names on the same ports. With GPUFLEET_MOLECULE_LOCK=/path a scenario runs
holding a shared flock on that file (a plain `flock /path molecule test ...`, or an older runner,
takes it exclusively and so waits for every scenario of this runner, and they for it) and an
exclusive flock on /path.d/<resource> for its own name and for each port it uses, so scenarios of
different runs take turns exactly where they would collide.

Where the time goes (issue 36): each scenario's log gets a companion LOG_DIR/molecule-NAME.times,
one line per Molecule step, play and task with the seconds from the scenario's start and how long it
lasted (until the next such line), and the summary ends with each scenario's step times and the
slowest tasks of the whole run. The times come from when each line arrived, so no callback plugin is
needed (profile_tasks leaks into the scenarios' nested ansible-playbook runs and breaks those that
parse their JSON); a task that runs a nested ansible-playbook counts as one task.

    python scripts/molecule_scenarios.py [--log-dir DIR] [--molecule CMD] [--jobs N] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import pathlib
import re
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Ansible module payloads compiled once per content on this machine too, not on every module run (issue 36): the
# scenarios' tasks on the controller's localhost (create, destroy, nested ansible-playbook runs) run modules with
# this machine's Pythons; the containers have the base image's .pth instead. Test hosts only:
# tests/support/ansiballz_code_cache/ says how and why.
sys.path.insert(0, str(ROOT / "tests"))
from support.code_cache_env import with_code_cache  # noqa: E402  pylint: disable=wrong-import-position

TASK_HEADER = re.compile(r"^TASK \[(?P<name>.*)\]")
ANSIBLE_ERROR = re.compile(r"^\[ERROR\]: (?P<msg>.*)")
FAILED_HOST = re.compile(r"^(?:fatal|failed): \[[^\]]+\]")
MOLECULE_ERROR = re.compile(r"^(?:ERROR|CRITICAL)\b|Traceback \(most recent call last\)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The lines that start something in a scenario's output: a Molecule step, an Ansible play, task or handler.
MOLECULE_STEP = re.compile(r"^INFO\s+\[(?P<scenario>[^\]>]+) > (?P<step>[^\]]+)\] (?P<what>Executing|Executed)")
PROFILE_MARK = re.compile(r"^(?:(?:TASK|RUNNING HANDLER|PLAY) \[(?P<name>.*)\]|PLAY RECAP)")
SLOWEST_TASKS_SHOWN = 12
# The project's loopback ports are 30000-33999 (docs/development.md lists each scenario's range).
LOOPBACK_PORT = re.compile(r"(?<![\d.])(3[0-3]\d{3})(?![\d.])")
BORROWED_SCENARIO = re.compile(r"\.\./(?P<name>[A-Za-z0-9_]+)/")
# Seconds each scenario took in the cold run of 2026-12-04 (idle 2-core VM, one at a time): only the
# order of starts depends on them (longest first, so the last one to start is short). A scenario
# missing here counts as 120 s.
DURATION_HINTS = {
    "nvidia_driver": 565, "fleet": 237, "sglang_build": 224, "passthrough": 165, "default": 158,
    "trixie": 155, "sglang_service": 138, "smoke_rollback": 131, "multinode": 65, "preflight": 58,
}
LOCK_POLL_SECONDS = 0.5


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def discover(project: pathlib.Path) -> list[str]:
    return sorted(p.parent.name for p in (project / "molecule").glob("*/molecule.yml"))


def scenario_resources(project: pathlib.Path, name: str) -> frozenset[str]:
    """What two scenarios running at once must not share: the scenario itself and its loopback ports.

    Ports are the numbers 30000-33999 in any file of molecule/NAME/ or of a scenario whose files
    molecule.yml borrows by path (molecule/trixie runs molecule/default's playbooks and group_vars).
    A number in a comment counts too: a false conflict costs some minutes, a missed one a red run."""
    folder = project / "molecule" / name
    folders = {folder}
    for borrowed in BORROWED_SCENARIO.finditer((folder / "molecule.yml").read_text()):
        if (project / "molecule" / borrowed.group("name") / "molecule.yml").is_file():
            folders.add(project / "molecule" / borrowed.group("name"))
    ports = set()
    for path in (p for each in folders for p in each.rglob("*") if p.is_file()):
        try:
            ports.update(LOOPBACK_PORT.findall(path.read_text()))
        except (UnicodeDecodeError, OSError):
            continue
    return frozenset({f"scenario-{name}", *(f"port-{port}" for port in ports)})


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


def port_lock_folder() -> pathlib.Path:
    """tests/support/ports.py's LOCKS (the same rule; the runner does not import the test tree)."""
    return pathlib.Path(os.environ.get("GPUFLEET_PORT_LOCKS") or pathlib.Path(tempfile.gettempdir()) / "gpufleet-test-ports")


class CrossRunLocks:
    """The flocks of GPUFLEET_MOLECULE_LOCK (module docstring) and of the tests' port pool; taken without blocking,
    all or none.

    PORT_LOCKS is tests/support/ports.py's folder: `make test` runs the scenarios beside the unit stage (issue 36),
    whose servers take loopback ports from pools under an flock on PORT_LOCKS/<port>.lock. Holding the same lock
    for each port of a running scenario keeps a test off a port the scenario's stand-in server binds, and the
    scenario waits for a test that holds one of its ports."""

    def __init__(self, path: str | None, port_locks: pathlib.Path | None = None):
        self.path = path
        self.port_locks = port_locks

    def try_take(self, resources: frozenset[str]) -> list | None:
        held = []
        try:
            pending = []
            if self.port_locks is not None:
                self.port_locks.mkdir(parents=True, exist_ok=True)
                pending += [(str(self.port_locks / f"{resource[len('port-'):]}.lock"), fcntl.LOCK_EX)
                            for resource in sorted(resources) if resource.startswith("port-")]
            if self.path:
                pending.append((self.path, fcntl.LOCK_SH))
                folder = pathlib.Path(self.path + ".d")
                folder.mkdir(parents=True, exist_ok=True)
                pending += [(str(folder / resource), fcntl.LOCK_EX) for resource in sorted(resources)]
            for lock_path, kind in pending:
                handle = open(lock_path, "a")  # pylint: disable=consider-using-with  # released in release()
                try:
                    fcntl.flock(handle, kind | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    self.release(held)
                    return None
                held.append(handle)
            return held
        except BaseException:
            self.release(held)
            raise

    @staticmethod
    def release(held: list) -> None:
        for handle in reversed(held):
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()


@dataclasses.dataclass
class Running:
    name: str
    proc: subprocess.Popen
    log: object
    locks: list
    started: float
    partial: bytes = b""
    # (seconds since started, Molecule step, what started: "TASK [...]", "PLAY [...]", a step's start or end)
    marks: list = dataclasses.field(default_factory=list)
    step: str = ""

    def note(self, line: bytes) -> None:
        """Keep the time of a line that starts a step, play or task (the profile)."""
        text = ANSI.sub("", line.decode(errors="replace")).strip()
        if step := MOLECULE_STEP.match(text):
            self.step = step.group("step") if step.group("what") == "Executing" else ""
            self.marks.append((time.monotonic() - self.started, step.group("step"), f"{step.group('what')} step"))
        elif PROFILE_MARK.match(text):
            self.marks.append((time.monotonic() - self.started, self.step, text.rstrip("* ").strip()))


def profile(marks: list, ended: float) -> tuple[dict[str, float], list[tuple[float, str, str, float]]]:
    """Seconds per Molecule step, and (seconds, step, what, start) per task, play and handler of one scenario."""
    steps: dict[str, float] = {}
    begun: dict[str, float] = {}
    tasks = []
    for index, (at, step, what) in enumerate(marks):
        if what == "Executing step":
            begun[step] = at
        elif what == "Executed step" and step in begun:
            steps[step] = steps.get(step, 0.0) + at - begun.pop(step)
        else:
            until = marks[index + 1][0] if index + 1 < len(marks) else ended
            tasks.append((until - at, step, what, at))
    return steps, tasks


def stop(running: Running) -> None:
    """Stop molecule and the ansible-playbook it runs (its own process group)."""
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 5)):
        try:
            os.killpg(running.proc.pid, sig)
            running.proc.wait(timeout=grace)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


class Runner:  # pylint: disable=too-many-instance-attributes
    def __init__(self, args, scenarios: list[str]):
        self.args = args
        self.molecule = shlex.split(args.molecule)
        self.scenarios = scenarios
        self.jobs = max(1, args.jobs)
        self.resources = {name: scenario_resources(args.project, name) for name in scenarios}
        self.locks = CrossRunLocks(os.environ.get("GPUFLEET_MOLECULE_LOCK") or None, port_lock_folder())
        # One at a time: the order given (or name order); several: longest first.
        self.queue = list(scenarios) if self.jobs == 1 else sorted(
            scenarios, key=lambda name: -DURATION_HINTS.get(name, 120))
        self.running: dict[int, Running] = {}
        self.results: dict[str, tuple[str, float, str]] = {}
        self.profiles: dict[str, tuple[dict[str, float], list]] = {}
        self.selector = selectors.DefaultSelector()
        self.started_count = 0
        self.waiting_said: set[str] = set()
        self.launching = False
        self.pending_signal = 0

    def emit(self, running: Running, chunk: bytes) -> None:
        running.log.write(chunk.decode(errors="replace"))
        running.log.flush()
        if self.jobs > 1:
            chunk = f"{running.name} | ".encode() + chunk
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()

    def start_what_fits(self) -> None:
        busy = set().union(*(self.resources[r.name] for r in self.running.values()))
        for name in list(self.queue):
            if len(self.running) >= self.jobs:
                return
            if self.resources[name] & busy:
                continue
            held = self.locks.try_take(self.resources[name])
            if held is None:
                if name not in self.waiting_said:
                    self.waiting_said.add(name)
                    print(f"=== [molecule] {name}: waiting for another run's scenario on the same container or "
                          f"ports, or a test holding one of its ports (locks {self.locks.path}, "
                          f"{self.locks.port_locks})", flush=True)
                continue
            # A signal between the start of molecule and its bookkeeping would leave it running unseen: the
            # handler only notes it meanwhile (a blocked signal mask would be inherited by molecule).
            self.launching = True
            try:
                self.launch(name, held)
            finally:
                self.launching = False
            if self.pending_signal:
                raise Interrupted(self.pending_signal)
            busy |= self.resources[name]

    def launch(self, name: str, held: list) -> None:
        self.queue.remove(name)
        self.started_count += 1
        print(f"=== [molecule {self.started_count}/{len(self.scenarios)}] {name}", flush=True)
        log = open(self.args.log_dir / f"molecule-{name}.log", "w")  # pylint: disable=consider-using-with
        proc = subprocess.Popen([*self.molecule, "test", "-s", name], cwd=self.args.project,
                                env=with_code_cache(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        running = Running(name, proc, log, held, time.monotonic())
        os.set_blocking(proc.stdout.fileno(), False)
        self.running[proc.pid] = running
        self.selector.register(proc.stdout, selectors.EVENT_READ, running)

    def write_profile(self, running: Running, took: float) -> None:
        steps, tasks = profile(running.marks, took)
        self.profiles[running.name] = (steps, tasks)
        with open(self.args.log_dir / f"molecule-{running.name}.times", "w", encoding="utf-8") as out:
            out.write("# start_s\tseconds\tstep\twhat (scripts/molecule_scenarios.py; the time from this line to the next)\n")
            for seconds, step, what, at in sorted(tasks, key=lambda task: task[3]):
                out.write(f"{at:.1f}\t{seconds:.1f}\t{step}\t{what}\n")
            out.write("".join(f"# step {step}: {seconds:.1f} s\n" for step, seconds in steps.items()))

    def report_profile(self) -> None:
        """Each scenario's step times and the slowest tasks of the run (issue 36: find the time before cutting it)."""
        if not self.profiles:
            return
        print("--- molecule steps (s)")
        for name, (steps, _tasks) in sorted(self.profiles.items()):
            if steps:
                print(f"{name + ':':<17} " + ", ".join(f"{step} {seconds:.0f}" for step, seconds in steps.items()))
        slowest = sorted(((seconds, name, step, what) for name, (_steps, tasks) in self.profiles.items()
                          for seconds, step, what, _at in tasks if not what.startswith("PLAY")), reverse=True)
        print(f"--- slowest Molecule tasks (of {sum(len(tasks) for _steps, tasks in self.profiles.values())}; "
              f"each scenario's in LOG_DIR/molecule-NAME.times)")
        for seconds, name, step, what in slowest[:SLOWEST_TASKS_SHOWN]:
            print(f"{seconds:6.1f} s  {name} > {step}: {what[:150]}")

    def on_signal(self, signum: int, _frame) -> None:
        if self.launching:
            self.pending_signal = signum
            return
        raise Interrupted(signum)

    def finish(self, running: Running) -> None:
        self.selector.unregister(running.proc.stdout)
        if running.partial:
            self.emit(running, running.partial + b"\n")
        rc = running.proc.wait()
        took = time.monotonic() - running.started
        running.proc.stdout.close()
        running.log.close()
        self.write_profile(running, took)
        self.locks.release(running.locks)
        del self.running[running.proc.pid]
        log_path = self.args.log_dir / f"molecule-{running.name}.log"
        self.results[running.name] = (("PASS", took, "") if rc == 0
                                      else (f"FAIL (exit {rc})", took, first_failure(log_path)))
        print(f"=== [molecule] {running.name}: {self.results[running.name][0]} in {took:.0f} s", flush=True)

    def pump(self, timeout: float) -> None:
        for key, _events in self.selector.select(timeout):
            running: Running = key.data
            data = running.proc.stdout.read()
            if data is None:  # woken without data
                continue
            if not data:  # end of output: the scenario ended
                self.finish(running)
                continue
            lines = (running.partial + data).split(b"\n")
            running.partial = lines.pop()
            for line in lines:
                running.note(line)
                self.emit(running, line + b"\n")

    def run(self) -> Interrupted | None:
        try:
            while self.queue or self.running:
                self.start_what_fits()
                self.pump(LOCK_POLL_SECONDS if self.queue or not self.selector.get_map() else None)
        except Interrupted as exc:
            for running in list(self.running.values()):
                stop(running)
                running.log.close()
                self.locks.release(running.locks)
                self.results[running.name] = ("INTERRUPTED", time.monotonic() - running.started, f"by {exc}")
            return exc
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: every molecule/*/molecule.yml)")
    parser.add_argument("--log-dir", type=pathlib.Path, default=ROOT / "tests" / "output" / "logs")
    parser.add_argument("--molecule", default="molecule", help="the molecule command (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1, help="scenarios at once (default: %(default)s)")
    parser.add_argument("--project", type=pathlib.Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    known = discover(args.project)
    scenarios = args.scenarios or known
    unknown = [name for name in scenarios if name not in known]
    if unknown:
        print(f"molecule: unknown scenario(s) {unknown}; known: {known}", file=sys.stderr)
        return 2
    args.log_dir.mkdir(parents=True, exist_ok=True)

    runner = Runner(args, scenarios)
    started_all = time.monotonic()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, runner.on_signal)
    interrupted = runner.run()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)

    # The profile before the table of results: CI shows only the last lines of a run, and a failed scenario's line
    # (with the failed task) must be among them, not pushed out by ~25 lines of timings (stop 50's CI).
    runner.report_profile()
    counts = {"passed": 0, "failed": 0, "not run": 0}
    print(f"--- molecule scenarios ({time.monotonic() - started_all:.0f} s, up to {runner.jobs} at once)")
    for name in scenarios:
        status, took, detail = runner.results.get(name, ("NOT RUN", 0.0, ""))
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
