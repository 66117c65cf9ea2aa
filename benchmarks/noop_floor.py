"""No-op site.yml against its floor, and `--tags sm120-patch` against the patch role alone (issue 20).

    python3 benchmarks/noop_floor.py [--runs 3] [--converge | --reuse] [--host gpufleet-scale-1]
                                     [--unit sglang-molecule-tiny.service] [--forks 20]
                                     [--floor-gather-subset '!all,!min,distribution,platform']
                                     [--compare EARLIER.json] [--json FILE]

Not part of `make test`. Needs one container host converged with site.yml: by default (--reuse) the
`gpufleet-scale-1` that `python3 benchmarks/scale_converge.py --sizes 1 --keep` leaves running, with
the files that run left in its work directory under /tmp (fingerprint of the stand-in NVIDIA
repository, deployment record); --converge starts and converges one first (minutes) and keeps it.
Each of these runs `--runs` times, in rounds A F T R, on the same inventory (the default scenario's
group_vars, docker connection, the project's ansible.cfg):
- A: the no-op site.yml;
- F: the floor of A, a play generated from A's first run: setup with a small fixed gather subset, one
  ansible.builtin.stat per distinct resource that A's state-managing tasks manage (their dest, path or
  name; a systemd unit is /etc/systemd/system/<name>, a package /var/lib/dpkg/status, a user
  /etc/passwd; plus the `resources` a result lists), gpu_info with probe=sysfs and A's roots, and
  openai_smoke_test with the arguments of A's checks call (same URL, model, checks and timeouts);
- T: site.yml --tags sm120-patch;
- R: the patch role alone, a generated play `roles: [gpufleet.llm_server.sglang_sm120_patch]`.
For each it prints wall seconds (time.monotonic), controller CPU seconds (RUSAGE_CHILDREN delta:
ansible-playbook, its forks, the docker CLI), host CPU seconds (the container cgroup's delta, which
includes the stand-in server answering the smoke checks) as minimum and median, and the tasks that
ran and were skipped per class, counted by benchmarks/callback_plugins/task_ledger.py (S manages
state, R reads the host, C controller only; one JSON line per task and host, kept with the logs).
Then the ratios A/F and T/R (the median of each round's ratio, judged against the target; also of the
minima, of the medians, and of the CPU seconds), A's controller CPU per host (median) and the floor's
resource count, against the targets of issue 20 (A/F <= 2, controller CPU <= 12 s per host, T/R <= 2).
No-op guard: every run must end with rc=0, changed=0 and failed=0 in the recap, and the unit's
InvocationID and NRestarts (`docker exec <host> systemctl show`) as before the first run; otherwise
the script exits 1 and names the run's log.
The controller and the container share the machine's cores: on a loaded machine every figure grows,
so the load average before each run is printed and kept in the JSON; compare ratios from one invocation.
Requires the Docker engine and the image (scripts/ensure-docker.sh, scripts/build-base-image.sh) and
the project venv (.venv, with community.docker).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys

from converged_hosts import (ROOT, configured_callbacks, container_cpu_seconds, converge, copy_kept_run_files,
                             new_work_dir, playbook, recap, sh, start, write_inventory)

CALLBACKS = pathlib.Path(__file__).resolve().parent / "callback_plugins"
RUNS = ("A", "F", "T", "R")
TITLES = {"A": "no-op site.yml", "F": "floor of A", "T": "site.yml --tags sm120-patch",
          "R": "sglang_sm120_patch alone"}
CLASSES = ("S", "R", "C")
TARGETS = {"A/F": 2.0, "controller_cpu_s_per_host": 12.0, "T/R": 2.0}
DPKG_STATUS = "/var/lib/dpkg/status"
UNIT_DIR = "/etc/systemd/system"
PACKAGE_ACTIONS = frozenset({"apt", "apt_transaction", "dpkg_selections", "package"})
UNIT_ACTIONS = frozenset({"systemd", "systemd_service", "service"})
COMMAND_ACTIONS = frozenset({"command", "shell", "script"})
ACCOUNT_FILES = {"user": "/etc/passwd", "group": "/etc/group"}
# Options of the smoke test's checks call that the floor does not repeat: the key is passed from the
# inventory (no_log hides it in the ledger), and the readiness wait belongs to the probe calls.
SMOKE_LEFT_OUT = frozenset({"api_key", "wait_timeout", "unit", "unit_baseline", "poll_interval", "probe_timeout",
                            "journal_lines"})


def short_action(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def load_ledger(path: pathlib.Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def class_counts(entries: list[dict]) -> dict:
    """Tasks that ran and were skipped per class, and the actions the ledger did not know."""
    counts = {"ran": dict.fromkeys(CLASSES, 0), "skipped": dict.fromkeys(CLASSES, 0)}
    for entry in entries:
        counts["skipped" if entry["status"] == "skipped" else "ran"][entry["class"]] += 1
    counts["unknown_actions"] = sorted({e["action"] for e in entries if not e.get("known", True)})
    return counts


def _absolute(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str) and v.startswith("/") and "{{" not in v]


def unit_path(name: str) -> str:
    return f"{UNIT_DIR}/{name if '.' in name else name + '.service'}"


def target_paths(action: str, target: dict) -> list[str]:
    """The files whose state an S task manages, from its recorded dest/path/name (task_ledger's targets)."""
    name = short_action(action)
    if name in PACKAGE_ACTIONS:
        return [DPKG_STATUS]
    if name in ACCOUNT_FILES:
        return [ACCOUNT_FILES[name]]
    if name in UNIT_ACTIONS:
        units = target.get("name")
        units = units if isinstance(units, list) else [units]
        return [unit_path(u) for u in units if isinstance(u, str) and u and "{{" not in u]
    if name == "systemd_credential":
        if isinstance(target.get("directory"), str) and isinstance(target.get("name"), str):
            return _absolute(f"{target['directory'].rstrip('/')}/{target['name']}")
        return []
    if name == "sglang_dependencies":
        return _absolute(target.get("python"))
    if name == "fetch":
        return _absolute(target.get("src"))
    if name == "pip":
        return _absolute(target.get("virtualenv"))
    if name in COMMAND_ACTIONS:
        # A command that manages state says what it makes or removes through creates/removes.
        return _absolute(target.get("creates")) or _absolute(target.get("removes"))
    for key in ("dest", "path", "name"):
        found = _absolute(target.get(key))
        if found:
            return found
    return []


def resource_paths(resource_entry) -> list[str]:
    """A `resources` item of a result: {kind, name} (unit, package, user, group, or a path) or a path."""
    if isinstance(resource_entry, str):
        return _absolute(resource_entry)
    if not isinstance(resource_entry, dict):
        return []
    kind, name = resource_entry.get("kind"), resource_entry.get("name") or resource_entry.get("path")
    if kind == "package":
        return [DPKG_STATUS]
    if kind in ACCOUNT_FILES:
        return [ACCOUNT_FILES[kind]]
    if kind == "unit" and isinstance(name, str):
        return [unit_path(name)]
    return _absolute(name)


def floor_resources(entries: list[dict]) -> tuple[list[str], list[dict]]:
    """Distinct paths to stat for the floor, and the S tasks that ran without a path to stat."""
    paths: set[str] = set()
    unmapped = []
    for entry in entries:
        for item in entry.get("resources") or []:
            paths.update(resource_paths(item))
        if entry["class"] != "S" or entry["status"] == "skipped":
            continue
        if short_action(entry["action"]) in PACKAGE_ACTIONS:
            # apt's index refresh and apt_transaction name no package in dest/path/name.
            paths.add(DPKG_STATUS)
            continue
        found = [p for target in entry.get("targets") or [] for p in target_paths(entry["action"], target)]
        if found:
            paths.update(found)
        elif not entry.get("resources"):
            unmapped.append({"role": entry.get("role"), "task": entry["task"], "action": entry["action"]})
    return sorted(paths), unmapped


def floor_inputs(entries: list[dict]) -> tuple[dict, dict]:
    """gpu_info's arguments (first call) and openai_smoke_test's (the call that ran checks) in A."""
    gpu_args = smoke_args = None
    for entry in entries:
        if entry["status"] == "skipped" or entry["class"] == "C":
            continue
        for args in entry.get("module_args") or []:
            action = short_action(entry["action"])
            if action == "gpu_info" and gpu_args is None:
                gpu_args = args
            elif action == "openai_smoke_test" and smoke_args is None and args.get("checks"):
                smoke_args = args
    if gpu_args is None or smoke_args is None:
        missing = " and ".join(n for n, a in (("gpu_info", gpu_args), ("openai_smoke_test checks", smoke_args))
                               if a is None)
        raise ValueError(f"the ledger of A has no {missing} call that ran: the floor cannot be built")
    gpu = {k: v for k, v in gpu_args.items() if v is not None}
    gpu["probe"] = "sysfs"
    smoke = {k: v for k, v in smoke_args.items() if v is not None and k not in SMOKE_LEFT_OUT}
    smoke["api_key"] = "{{ llm_server_api_key | default(omit, true) }}"
    return gpu, smoke


def floor_play(paths: list[str], gpu_args: dict, smoke_args: dict, gather_subset: list[str]) -> list[dict]:
    """The floor: what any no-op converge of these resources has to do at least (reads, no decisions)."""
    return [{
        "name": "Floor of a no-op site.yml (benchmarks/noop_floor.py)",
        "hosts": "llm_servers",
        "gather_facts": False,
        "tasks": [
            {"name": "Gather facts", "ansible.builtin.setup": {"gather_subset": gather_subset}},
            # A state read needs existence, mode, owner and content; mime type and attributes cost a
            # process each (file, lsattr) and no role compares them.
            {"name": "Read the managed resources", "ansible.builtin.stat": {
                "path": "{{ item }}", "get_mime": False, "get_attributes": False},
             "loop": paths},
            {"name": "Read GPU facts", "gpufleet.llm_server.gpu_info": gpu_args},
            {"name": "Smoke test", "gpufleet.llm_server.openai_smoke_test": smoke_args},
        ],
    }]


ROLE_ALONE = [{
    "name": "sglang_sm120_patch alone (benchmarks/noop_floor.py)",
    "hosts": "llm_servers",
    "gather_facts": False,
    "roles": ["gpufleet.llm_server.sglang_sm120_patch"],
}]


def summary(values: list[float]) -> dict:
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2)}


def ratios(figures: dict) -> dict:
    """A/F and T/R: of the minima, of the medians, and the median of each round's own ratio (its runs follow
    each other within minutes, so a change of load on a shared machine moves both); by CPU seconds too
    (controller plus host, which load changes less than wall time)."""
    out = {}
    for name, (top, bottom) in (("A/F", ("A", "F")), ("T/R", ("T", "R"))):
        top_wall, bottom_wall = figures[top]["wall_s"], figures[bottom]["wall_s"]
        rounds = [round(a / b, 2) for a, b in zip(top_wall, bottom_wall)]
        out[name] = {"min": round(min(top_wall) / min(bottom_wall), 2),
                     "median": round(statistics.median(top_wall) / statistics.median(bottom_wall), 2),
                     "rounds": rounds, "median_of_rounds": round(statistics.median(rounds), 2)}
        cpu = []
        for run in (top, bottom):
            totals = [c + h for c, h in zip(figures[run]["controller_cpu_s"], figures[run]["host_cpu_s"])
                      if c is not None and h is not None]
            cpu.append(statistics.median(totals) if totals else None)
        out[name]["cpu"] = round(cpu[0] / cpu[1], 2) if None not in cpu and cpu[1] else None
    return out


def figures_of(fig: dict) -> dict:
    """One run's JSON: min and median per figure, the samples, task classes, recap, load, logs."""
    out = {}
    for key in ("wall_s", "controller_cpu_s", "host_cpu_s"):
        values = [v for v in fig[key] if v is not None]
        out[key] = summary(values) if values else None
    out["samples"] = {key: fig[key] for key in ("wall_s", "controller_cpu_s", "host_cpu_s")}
    out.update({key: fig[key] for key in fig if key not in out["samples"]})
    return out


def format_table(figures: dict) -> str:
    head = (f"{'run':<32} {'n':>2} {'wall s min/med':>15} {'ctrl CPU s':>12} {'host CPU s':>12} "
            f"{'ran S/R/C':>12} {'skipped S/R/C':>14}")
    lines = [head, "-" * len(head)]
    for run in RUNS:
        fig = figures.get(run)
        if not fig:
            continue
        cols = []
        for key in ("wall_s", "controller_cpu_s", "host_cpu_s"):
            values = [v for v in fig[key] if v is not None]
            cols.append(f"{min(values):.1f}/{statistics.median(values):.1f}" if values else "n/a")
        tasks = fig["tasks"]
        ran = "/".join(str(tasks["ran"][c]) for c in CLASSES)
        skipped = "/".join(str(tasks["skipped"][c]) for c in CLASSES)
        lines.append(f"{run + ' ' + TITLES[run]:<32} {len(fig['wall_s']):>2} {cols[0]:>15} {cols[1]:>12} "
                     f"{cols[2]:>12} {ran:>12} {skipped:>14}")
    return "\n".join(lines)


def dump_yaml(data) -> str:
    # JSON is YAML: no PyYAML needed to write a playbook.
    return "---\n" + json.dumps(data, indent=1) + "\n"


def unit_state(host: str, unit: str) -> dict[str, str]:
    proc = sh(["docker", "exec", host, "systemctl", "show", "-p", "InvocationID", "-p", "NRestarts",
               "-p", "ActiveState", unit])
    if proc.returncode != 0:
        sys.exit(f"cannot read {unit} on {host}: {proc.stderr.strip()} (is the converged container running?)")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def git_commit() -> str:
    proc = sh(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    return proc.stdout.strip() or "unknown"


class Bench:
    def __init__(self, args: argparse.Namespace, work: pathlib.Path, inventory: pathlib.Path):
        self.args, self.work, self.inventory = args, work, inventory
        self.unit_before = unit_state(args.host, args.unit)
        if self.unit_before.get("ActiveState") != "active":
            sys.exit(f"{args.unit} on {args.host} is {self.unit_before.get('ActiveState')}, not active: "
                     "converge the host first (scale_converge.py --sizes 1 --keep, or --converge)")
        self.figures: dict[str, dict] = {}
        # The environment variable replaces ansible.cfg's list: keep the callbacks a user's run has (worker_gc).
        enabled = [c.strip() for c in os.environ.get("ANSIBLE_CALLBACKS_ENABLED", configured_callbacks()).split(",")
                   if c.strip()] + ["task_ledger"]
        self.env = {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": ",".join(enabled)}

    def run(self, label: str, round_no: int, play: pathlib.Path, extra_args: list[str] | None = None) -> list[dict]:
        log = self.work / f"{label}-{round_no}.log"
        ledger = self.work / f"{label}-{round_no}.jsonl"
        load = os.getloadavg()[0]
        host_before = container_cpu_seconds(self.args.host)
        ru_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed, out, rc = playbook(self.inventory, play, self.args.forks, limit=self.args.host, log=log,
                                    extra_args=extra_args, extra_env=dict(self.env, GPUFLEET_TASK_LEDGER=str(ledger)))
        ru_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        host_after = container_cpu_seconds(self.args.host)
        controller = (ru_after.ru_utime - ru_before.ru_utime) + (ru_after.ru_stime - ru_before.ru_stime)
        host_cpu = host_after - host_before if None not in (host_before, host_after) else None
        counters = recap(out)
        unit_after = unit_state(self.args.host, self.args.unit)
        entries = load_ledger(ledger)
        tasks = class_counts(entries)
        host_text = f"{host_cpu:.1f}" if host_cpu is not None else "n/a"
        print(f"{label}{round_no} {TITLES[label]}: {elapsed:.1f}s, CPU s controller {controller:.1f} host {host_text}, "
              f"ran S/R/C {'/'.join(str(tasks['ran'][c]) for c in CLASSES)}, load {load:.2f}", flush=True)
        problems = []
        if rc != 0:
            problems.append(f"rc={rc}")
        if not counters.get(self.args.host):
            problems.append("no PLAY RECAP line for the host")
        elif counters[self.args.host]["changed"] or counters[self.args.host]["failed"]:
            problems.append(f"recap {counters[self.args.host]}")
        for key in ("InvocationID", "NRestarts"):
            if unit_after.get(key) != self.unit_before.get(key):
                problems.append(f"{self.args.unit} {key} {self.unit_before.get(key)} -> {unit_after.get(key)}")
        if not entries:
            problems.append(f"the task ledger {ledger} is empty (callback not loaded?)")
        if problems:
            print(f"NOT A NO-OP RUN ({'; '.join(problems)}): see {log}")
            sys.exit(1)
        fig = self.figures.setdefault(label, {"wall_s": [], "controller_cpu_s": [], "host_cpu_s": [], "load1": [],
                                              "logs": []})
        fig["wall_s"].append(round(elapsed, 2))
        fig["controller_cpu_s"].append(round(controller, 2))
        fig["host_cpu_s"].append(round(host_cpu, 2) if host_cpu is not None else None)
        fig["load1"].append(round(load, 2))
        fig["logs"].append(str(log))
        if "tasks" in fig and fig["tasks"] != tasks:
            fig.setdefault("tasks_differ_between_runs", True)
        fig["tasks"] = tasks
        fig["recap"] = counters[self.args.host]
        return entries


def targets_met(result: dict) -> dict:
    return {
        "A/F": result["ratios"]["A/F"]["median_of_rounds"] <= TARGETS["A/F"],
        "controller_cpu_s_per_host": result["controller_cpu_s_per_host"]["median"] <= TARGETS["controller_cpu_s_per_host"],
        "T/R": result["ratios"]["T/R"]["median_of_rounds"] <= TARGETS["T/R"],
    }


def print_report(result: dict, figures: dict, earlier: dict | None = None, earlier_file=None) -> None:
    print()
    print(format_table(figures))
    print()
    for name in ("A/F", "T/R"):
        r = result["ratios"][name]
        cpu_text = f"{r['cpu']:.2f}" if r["cpu"] is not None else "n/a"
        print(f"{name}: {r['median_of_rounds']:.2f} (median of the rounds {r['rounds']}), {r['median']:.2f} (of the "
              f"medians), {r['min']:.2f} (of the minima), {cpu_text} (CPU seconds); target <= {TARGETS[name]:g} "
              f"{'met' if result['met'][name] else 'NOT met'}")
    cpu = result["controller_cpu_s_per_host"]
    met = "met" if result["met"]["controller_cpu_s_per_host"] else "NOT met"
    print(f"A's controller CPU per host: {cpu['median']:.1f} s (median) / {cpu['min']:.1f} s (min); target <= "
          f"{TARGETS['controller_cpu_s_per_host']:g} s {met}")
    floor_info = result["floor"]
    print(f"floor resources: {floor_info['resources']}; load average at start {result['load_start']}, "
          f"at end {result['load_end']} on {result['cores']} cores")
    for run in RUNS:
        unknown = figures[run]["tasks"]["unknown_actions"]
        if unknown:
            print(f"warning: {run} ran actions task_ledger does not class (counted C): {', '.join(unknown)}")
    if earlier:
        def ratio(name):
            return earlier["ratios"][name].get("median_of_rounds", earlier["ratios"][name].get("median"))
        print(f"earlier ({earlier_file}, {earlier.get('date')}, {earlier.get('commit')}): A/F {ratio('A/F')}, "
              f"T/R {ratio('T/R')}, controller CPU/host {earlier['controller_cpu_s_per_host']['median']} s, "
              f"floor resources {earlier['floor']['resources']}")
        if floor_info["resources"] < earlier["floor"]["resources"]:
            print(f"warning: the floor has fewer resources than earlier ({floor_info['resources']} < "
                  f"{earlier['floor']['resources']}): a state module may be missing `resources` in its result")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="rounds of A F T R (default 3)")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--reuse", action="store_true", default=True,
                     help="the host is converged and running, kept by an earlier --keep run (default)")
    how.add_argument("--converge", action="store_true", help="start and converge the host first, and keep it")
    ap.add_argument("--host", default="gpufleet-scale-1")
    ap.add_argument("--unit", default="sglang-molecule-tiny.service",
                    help="the served unit (the default scenario's profile molecule-tiny)")
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--floor-gather-subset", default="!all,!min,distribution,platform",
                    help="setup's gather_subset in the floor, comma-separated (fixed so floors compare over time)")
    ap.add_argument("--compare", type=pathlib.Path, help="an earlier --json: print its figures beside these")
    ap.add_argument("--json", type=pathlib.Path, help="also write the figures here")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    work = new_work_dir()
    if not args.converge:
        copy_kept_run_files(work, [args.host])
    inventory = write_inventory(work, [args.host])
    print(f"logs and ledgers: {work}", flush=True)
    if args.converge:
        start(args.host)
        if not converge(inventory, work, 1, args.forks):
            return 1
    elif not list(work.glob("fake-nvidia-repo-*.fingerprint")):
        sys.exit(f"no files of a kept run for {args.host} under /tmp/gpufleet-scale-*: run "
                 "`python3 benchmarks/scale_converge.py --sizes 1 --keep` first, or pass --converge")
    load_start = os.getloadavg()
    uptime_start = subprocess.run(["uptime"], text=True, capture_output=True, check=False).stdout.strip()
    bench = Bench(args, work, inventory)
    site = ROOT / "site.yml"
    role_alone = work / "role-alone.yml"
    role_alone.write_text(dump_yaml(ROLE_ALONE))
    floor = work / "floor.yml"
    floor_info: dict = {}
    for round_no in range(1, args.runs + 1):
        entries = bench.run("A", round_no, site)
        if round_no == 1:
            paths, unmapped = floor_resources(entries)
            try:
                gpu_args, smoke_args = floor_inputs(entries)
            except ValueError as err:
                sys.exit(f"{err} (see {work}/A-1.log)")
            floor.write_text(dump_yaml(floor_play(paths, gpu_args, smoke_args, args.floor_gather_subset.split(","))))
            floor_info = {"resources": len(paths), "paths": paths, "s_tasks_without_path": unmapped,
                          "gather_subset": args.floor_gather_subset.split(","), "play": str(floor)}
            print(f"floor: {len(paths)} resources to stat ({floor}); S tasks with no path: {len(unmapped)}",
                  flush=True)
        bench.run("F", round_no, floor)
        bench.run("T", round_no, site, ["--tags", "sm120-patch"])
        bench.run("R", round_no, role_alone)
    figures = bench.figures
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(), "cores": os.cpu_count(), "host": args.host, "runs": args.runs,
        "forks": args.forks, "uptime_start": uptime_start, "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "figures": {run: figures_of(figures[run]) for run in RUNS},
        "ratios": ratios(figures),
        "controller_cpu_s_per_host": summary(figures["A"]["controller_cpu_s"]),
        "floor": floor_info,
        "targets": TARGETS,
    }
    result["met"] = targets_met(result)
    earlier = json.loads(args.compare.read_text()) if args.compare else None
    print_report(result, figures, earlier, args.compare)
    if earlier:
        result["compare"] = {"file": str(args.compare), "date": earlier.get("date"), "commit": earlier.get("commit"),
                             "ratios": earlier["ratios"], "controller_cpu_s_per_host": earlier["controller_cpu_s_per_host"],
                             "floor_resources": earlier["floor"]["resources"]}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"logs and ledgers: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
