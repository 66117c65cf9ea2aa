"""Benchmark callback: one JSON line per task and host, with the task's class (S, R or C).

Used by benchmarks/noop_floor.py; not part of the collection's plugins (ansible.cfg keeps the
project's runs to ansible-core's own callbacks). Enable it next to the default stdout callback:

    ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins ANSIBLE_CALLBACKS_ENABLED=task_ledger \
    GPUFLEET_TASK_LEDGER=/tmp/ledger.jsonl ansible-playbook ...

Classes (docs/performance.md "Method"):
- S, manages state: a module that may change the host (apt, template, file, systemd with a state, git
  and python_source_patch outside check mode, apt_transaction unless plan_only, the project's writers,
  command/shell/script whose changed_when is not false);
- R, remote read: a module that runs on the host and changes nothing (stat, slurp, setup, gpu_info,
  openai_smoke_test, *_state modules, read-only commands);
- C, controller only: assert, set_fact, debug, includes, meta, argument validation, and every task
  delegated to the controller.
An action in none of the tables is counted C and written with "known": false, so that a new module
is noticed (tests/unit/benchmarks checks that every action the roles use is known).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: task_ledger
type: aggregate
short_description: one JSON line per task and host, classed S, R or C (benchmarks/noop_floor.py)
description:
  - Appends a JSON object per task result to the file named by E(GPUFLEET_TASK_LEDGER).
options:
  ledger_file:
    description: The JSON-lines file to append to.
    env:
      - name: GPUFLEET_TASK_LEDGER
    required: true
"""

STATE_MANAGING = frozenset({
    "apt", "apt_key", "apt_repository", "deb822_repository", "debconf", "dpkg_selections", "package", "pip",
    "template", "copy", "file", "lineinfile", "blockinfile", "replace", "assemble", "get_url", "unarchive",
    "user", "group", "fetch", "reboot", "hostname", "cron", "known_hosts", "sysctl", "modprobe", "mount",
    "alternatives", "sglang_dependencies", "server_file", "systemd_credential", "restart_marker",
    "sglang_known_good", "pci_driver_bind", "sglang_router_worker",
})
REMOTE_READ = frozenset({
    "stat", "slurp", "find", "setup", "gather_facts", "package_facts", "service_facts", "uri", "getent",
    "wait_for", "wait_for_connection", "ping", "gpu_info", "model_manifest", "sglang_preflight",
    "openai_smoke_test", "job_progress", "pve_guest_devices", "host_status",
})
CONTROLLER_ONLY = frozenset({
    "assert", "set_fact", "debug", "fail", "meta", "include_tasks", "import_tasks", "include_role",
    "import_role", "include_vars", "include", "validate_argument_spec", "set_stats", "add_host", "group_by",
    "pause", "role_inputs", "controller_file",
})
# Decided by the task's arguments or mode.
COMMANDS = frozenset({"command", "shell", "script", "raw"})
UNITS = frozenset({"systemd", "systemd_service", "service"})
UNIT_CHANGES = ("state", "enabled", "masked", "daemon_reload", "daemon_reexec")
CHECK_MODE_READS = frozenset({"git", "python_source_patch"})
CONTROLLER_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Arguments that name what an S task manages (noop_floor.py turns them into paths to stat).
# fetch's src is the host's file (a copy's or template's src is on the controller).
TARGET_KEYS = ("dest", "path", "name", "directory", "python", "virtualenv", "project_dir", "creates", "removes")
FETCH_TARGET_KEYS = ("src",)
# Reads whose arguments the floor play repeats.
RECORDED_ARGS = frozenset({"gpu_info", "openai_smoke_test", "setup"})


def short_action(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def changed_when_is_false(changed_when) -> bool:
    """True when changed_when can only be false (a read-only command): false, 'false', [false]."""
    values = changed_when if isinstance(changed_when, (list, tuple)) else [changed_when]
    values = [v for v in values if v is not None and v != ""]
    return bool(values) and all(v is False or (isinstance(v, str) and v.strip().lower() == "false")
                                for v in values)


def classify(action: str, args: dict | None = None, check_mode: bool = False, changed_when=None,
             on_controller: bool = False) -> tuple[str, bool]:
    """(class, known): S manages state, R reads the host, C runs on the controller only."""
    name = short_action(action)
    args = args or {}
    if name in CONTROLLER_ONLY:
        return "C", True
    known = (name in STATE_MANAGING or name in REMOTE_READ or name in COMMANDS or name in UNITS
             or name in CHECK_MODE_READS or name == "apt_transaction" or name.endswith("_state"))
    if on_controller:
        return "C", known
    if name in COMMANDS:
        return ("R" if changed_when_is_false(changed_when) else "S"), True
    if name in UNITS:
        # The arguments as written: the module's invocation lists every option, set or not.
        return ("S" if any(key in args for key in UNIT_CHANGES) else "R"), True
    if name in CHECK_MODE_READS:
        return ("R" if check_mode else "S"), True
    if name == "apt_transaction":
        return ("R" if args.get("plan_only") in (True, "true", "True", "yes") else "S"), True
    if name in STATE_MANAGING:
        return "S", True
    if name in REMOTE_READ or name.endswith("_state"):
        return "R", True
    return "C", False


def status_of(result: dict, event: str) -> str:
    if event == "skipped":
        return "skipped"
    if event in ("failed", "unreachable"):
        return "failed"
    return "changed" if result.get("changed") else "ok"


def item_results(result: dict) -> list[dict]:
    items = result.get("results")
    if isinstance(items, list) and items and all(isinstance(item, dict) for item in items):
        return items
    return [result]


def invocation_args(result: dict) -> dict:
    args = (result.get("invocation") or {}).get("module_args")
    return args if isinstance(args, dict) else {}


def targets_of(result: dict, task_args: dict, action: str = "") -> list[dict]:
    """The TARGET_KEYS of each item: from the module's invocation, else the item's result, else the task."""
    keys = FETCH_TARGET_KEYS if short_action(action) == "fetch" else TARGET_KEYS
    targets = []
    for item in item_results(result):
        if item.get("skipped"):
            continue
        sources = (invocation_args(item), item, task_args)
        found = {}
        for key in keys:
            for source in sources:
                value = source.get(key)
                if isinstance(value, (str, list)) and value:
                    found[key] = value
                    break
        if found:
            targets.append(found)
    return targets


def resources_of(result: dict) -> list:
    found = []
    for item in item_results(result):
        resources = item.get("resources")
        if isinstance(resources, list):
            found.extend(resources)
    return found


def recorded_args(result: dict) -> list[dict]:
    """Module arguments as the module saw them, without values hidden by no_log."""
    recorded = []
    for item in item_results(result):
        args = invocation_args(item)
        if args:
            recorded.append({k: v for k, v in args.items() if v != "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"})
    return recorded


def jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def ledger_entry(event: str, host: str, role: str | None, task_name: str, action: str, result: dict,
                 task_fields: dict, delegated_to: str | None, handler: bool = False,
                 seconds: float | None = None, ignored: bool = False) -> dict:
    """One ledger line (pure: the callback below feeds it from Ansible's result objects)."""
    task_args = task_fields.get("args") if isinstance(task_fields.get("args"), dict) else {}
    check_mode = bool(task_fields.get("check_mode"))
    changed_when = task_fields.get("changed_when")
    on_controller = bool(delegated_to) and delegated_to in CONTROLLER_HOSTS
    klass, known = classify(action, task_args, check_mode, changed_when, on_controller)
    entry = {
        "host": host, "role": role, "task": task_name, "action": action, "status": status_of(result, event),
        "class": klass, "known": known, "handler": handler, "check_mode": check_mode,
        "changed_when": jsonable(changed_when), "delegated_to": delegated_to, "resources": resources_of(result),
    }
    if isinstance(result.get("results"), list):
        entry["items"] = len(result["results"])
    if ignored:
        entry["ignored"] = True
    if klass == "S" and entry["status"] != "skipped":
        entry["targets"] = targets_of(result, task_args, action)
    if short_action(action) in RECORDED_ARGS and entry["status"] != "skipped":
        entry["module_args"] = recorded_args(result)
    if seconds is not None:
        entry["seconds"] = round(seconds, 3)
    return entry


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_ledger"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started: dict[tuple[str, str], float] = {}
        self._path = None

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self._path = self.get_option("ledger_file") or os.environ.get("GPUFLEET_TASK_LEDGER")

    def v2_runner_on_start(self, host, task):
        self._started[(host.get_name(), task._uuid)] = time.monotonic()

    def _record(self, result, event: str, ignored: bool = False) -> None:
        if not self._path:
            return
        task = result._task
        host = result._host.get_name()
        started = self._started.pop((host, task._uuid), None)
        role = task._role.get_name(include_role_fqcn=False) if task._role else None
        raw = result._result
        delegated = (raw.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host") or task.delegate_to
        entry = ledger_entry(event, host, role, str(result.task_name), task.resolved_action or task.action, raw,
                             dict(result._task_fields), str(delegated) if delegated else None,
                             handler=type(task).__name__ == "Handler",
                             seconds=(time.monotonic() - started) if started is not None else None,
                             ignored=ignored)
        with open(self._path, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(entry, default=repr) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed", ignored=ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
