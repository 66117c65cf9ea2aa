"""The pure parts of benchmarks/noop_floor.py and its callback benchmarks/callback_plugins/task_ledger.py.

data/site-noop-ledger.jsonl is a real ledger: the task_ledger lines of a no-op site.yml (run A of
`benchmarks/noop_floor.py`) on the container host `gpufleet-scale-1` converged by
`benchmarks/scale_converge.py --sizes 1 --keep` (molecule/default group_vars, branch issue-20a on
main + issue 17, 2026-12-01; see docs/performance.md). Its recap was ok=197 changed=0 skipped=119:
the ledger has 2 more skipped lines, the two `meta` tasks skipped by `when`, which the recap leaves out.
test_task_ledger_on_a_real_play runs ansible-playbook (connection local, files in tmp_path only).
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest
import yaml
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCHMARKS = ROOT / "benchmarks"
DATA = pathlib.Path(__file__).parent / "data"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import noop_floor  # noqa: E402  pylint: disable=wrong-import-position

_spec = importlib.util.spec_from_file_location("task_ledger", BENCHMARKS / "callback_plugins" / "task_ledger.py")
task_ledger = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(task_ledger)


@pytest.fixture(scope="module")
def ledger():
    return noop_floor.load_ledger(DATA / "site-noop-ledger.jsonl")


@pytest.mark.parametrize("action, args, check_mode, changed_when, on_controller, expected", [
    ("ansible.builtin.apt", {"name": "gpg"}, False, [], False, "S"),
    ("ansible.builtin.template", {"dest": "/etc/x"}, False, [], False, "S"),
    ("gpufleet.llm_server.apt_transaction", {"plan_only": True}, False, [], False, "R"),
    ("gpufleet.llm_server.apt_transaction", {"plan_only": False}, False, [], False, "S"),
    ("gpufleet.llm_server.python_source_patch", {"path": "/x.py"}, True, [], False, "R"),
    ("gpufleet.llm_server.python_source_patch", {"path": "/x.py"}, False, [], False, "S"),
    ("ansible.builtin.git", {"dest": "/srv/x"}, True, [], False, "R"),
    ("ansible.builtin.git", {"dest": "/srv/x"}, False, [], False, "S"),
    ("ansible.builtin.command", {}, False, [False], False, "R"),
    ("ansible.builtin.command", {}, False, ["false"], False, "R"),
    ("ansible.builtin.shell", {}, False, False, False, "R"),
    ("ansible.builtin.command", {}, False, [], False, "S"),
    ("ansible.builtin.command", {}, False, ["result.rc == 3"], False, "S"),
    ("ansible.builtin.command", {}, False, [False, "result.rc == 3"], False, "S"),
    ("ansible.builtin.systemd_service", {"name": "sglang-a.service"}, True, [], False, "R"),
    ("ansible.builtin.systemd_service", {"name": "sglang-a.service", "state": "started"}, False, [], False, "S"),
    ("ansible.builtin.systemd_service", {"daemon_reload": True}, False, [], False, "S"),
    ("ansible.builtin.stat", {"path": "/"}, False, [], False, "R"),
    ("ansible.builtin.stat", {"path": "/"}, False, [], True, "C"),
    ("ansible.builtin.copy", {"dest": "/tmp/report.json"}, False, [False], True, "C"),
    ("gpufleet.llm_server.sglang_preflight", {}, False, [], False, "R"),
    ("gpufleet.llm_server.sglang_preflight", {}, False, [], True, "C"),
    ("gpufleet.llm_server.nvidia_driver_state", {}, False, [], False, "R"),
    ("ansible.builtin.validate_argument_spec", {}, False, [], False, "C"),
    ("ansible.builtin.include_tasks", {}, False, [], False, "C"),
    ("ansible.builtin.set_fact", {}, False, [], False, "C"),
])
def test_classify(action, args, check_mode, changed_when, on_controller, expected):
    assert task_ledger.classify(action, args, check_mode, changed_when, on_controller) == (expected, True)


def test_unknown_action_is_counted_controller_and_flagged():
    assert task_ledger.classify("community.general.something_new", {}) == ("C", False)
    counts = noop_floor.class_counts([{"status": "ok", "class": "C", "known": False, "action": "x.y.new"},
                                      {"status": "skipped", "class": "S", "known": True, "action": "ansible.builtin.apt"}])
    assert counts == {"ran": {"S": 0, "R": 0, "C": 1}, "skipped": {"S": 1, "R": 0, "C": 0},
                      "unknown_actions": ["x.y.new"]}


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(key in node for key in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                yield from _tasks(node.get(key) or [])
        elif any(key in node for key in ("hosts", "import_playbook", "ansible.builtin.import_playbook")):
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(node.get(key) or [])
        else:
            yield node


KEYWORDS = {"name", "when", "register", "loop", "loop_control", "vars", "tags", "become", "become_user",
            "delegate_to", "run_once", "changed_when", "failed_when", "check_mode", "diff", "no_log", "notify",
            "listen", "ignore_errors", "environment", "until", "retries", "delay", "args", "async", "poll",
            "throttle", "any_errors_fatal", "module_defaults", "timeout", "delegate_facts", "ignore_unreachable",
            "collections", "connection", "debugger"}


def test_every_action_the_roles_use_is_classed():
    """A new module in a role must be put in one of task_ledger's tables, or the floor misses it."""
    files = sorted((ROOT / "roles").glob("*/tasks/*.yml")) + sorted((ROOT / "roles").glob("*/handlers/*.yml"))
    files += sorted((ROOT / "playbooks").glob("*.yml")) + [ROOT / "site.yml"]
    actions = set()
    for path in files:
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            actions.update(key for key in task if key not in KEYWORDS and not key.startswith("with_"))
    assert len(actions) > 30
    unknown = sorted(a for a in actions if not task_ledger.classify(a)[1])
    assert unknown == []


def test_ledger_entry_of_a_loop_and_a_no_log_result():
    loop = {"changed": False, "results": [
        {"changed": False, "invocation": {"module_args": {"path": "/etc/a", "state": "directory"}}},
        {"changed": False, "skipped": True},
        {"changed": False, "invocation": {"module_args": {"path": "/etc/b", "state": "directory"}}}]}
    entry = task_ledger.ledger_entry("ok", "h", "sglang_service", "Create dirs", "ansible.builtin.file", loop,
                                     {"args": {"path": "{{ item }}"}, "check_mode": False, "changed_when": []}, None)
    assert (entry["class"], entry["status"], entry["items"]) == ("S", "ok", 3)
    assert entry["targets"] == [{"path": "/etc/a"}, {"path": "/etc/b"}]
    # no_log: Ansible replaces the result; the path comes from the templated task arguments, the value never.
    censored = {"censored": "the output has been hidden", "changed": False}
    entry = task_ledger.ledger_entry(
        "ok", "h", "sglang_service", "Credential", "gpufleet.llm_server.systemd_credential", censored,
        {"args": {"name": "api-key", "directory": "/etc/c", "value": "s3cret"}, "check_mode": False}, None)
    assert entry["targets"] == [{"name": "api-key", "directory": "/etc/c"}]
    assert "s3cret" not in json.dumps(entry)
    smoke = {"changed": False, "invocation": {"module_args": {
        "base_url": "http://127.0.0.1:1", "api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER", "checks": ["models"]}}}
    entry = task_ledger.ledger_entry("ok", "h", "openai_smoke_test", "Run", "gpufleet.llm_server.openai_smoke_test",
                                     smoke, {"args": {}}, None)
    assert entry["class"] == "R" and entry["module_args"] == [{"base_url": "http://127.0.0.1:1", "checks": ["models"]}]
    skipped = task_ledger.ledger_entry("skipped", "h", None, "t", "ansible.builtin.template",
                                       {"skipped": True, "changed": False}, {"args": {}}, None)
    assert skipped["status"] == "skipped" and "targets" not in skipped


def test_target_paths():
    tp = noop_floor.target_paths
    assert tp("ansible.builtin.systemd_service", {"name": "nvidia-persistenced"}) == \
        ["/etc/systemd/system/nvidia-persistenced.service"]
    assert tp("ansible.builtin.systemd_service", {"name": "sglang-a.service"}) == ["/etc/systemd/system/sglang-a.service"]
    assert tp("ansible.builtin.apt", {"name": ["git", "python3-venv"]}) == ["/var/lib/dpkg/status"]
    assert tp("ansible.builtin.user", {"name": "sglang"}) == ["/etc/passwd"]
    assert tp("ansible.builtin.group", {"name": "sglang"}) == ["/etc/group"]
    assert tp("gpufleet.llm_server.systemd_credential", {"name": "api-key", "directory": "/etc/c/"}) == ["/etc/c/api-key"]
    assert tp("gpufleet.llm_server.sglang_dependencies", {"python": "/opt/v/bin/python", "project_dir": "/p"}) == \
        ["/opt/v/bin/python"]
    assert tp("ansible.builtin.fetch", {"src": "/var/lib/x.md"}) == ["/var/lib/x.md"]
    assert tp("ansible.builtin.command", {"creates": "/opt/v/bin/python"}) == ["/opt/v/bin/python"]
    assert tp("ansible.builtin.command", {}) == []
    assert tp("ansible.builtin.template", {"dest": "/etc/a", "path": "/etc/a"}) == ["/etc/a"]
    assert tp("ansible.builtin.file", {"path": "{{ item }}"}) == []
    assert noop_floor.resource_paths({"kind": "unit", "name": "sglang-a"}) == ["/etc/systemd/system/sglang-a.service"]
    assert noop_floor.resource_paths({"kind": "package", "name": "nvidia-driver-cuda"}) == ["/var/lib/dpkg/status"]
    assert noop_floor.resource_paths({"kind": "file", "name": "/etc/x"}) == ["/etc/x"]
    assert noop_floor.resource_paths("relative/x") == []


def test_recorded_ledger_counts(ledger):
    counts = noop_floor.class_counts(ledger)
    ran, skipped = sum(counts["ran"].values()), sum(counts["skipped"].values())
    assert (ran, skipped) == (197, 121)
    assert counts["unknown_actions"] == []
    # About one task in five that runs manages state (issue 20, plan section 0).
    assert 30 <= counts["ran"]["S"] <= 50 and counts["ran"]["C"] > counts["ran"]["S"] + counts["ran"]["R"]


def test_floor_from_the_recorded_ledger(ledger):
    paths, unmapped = noop_floor.floor_resources(ledger)
    assert unmapped == []
    assert paths == sorted(set(paths))
    assert all(p.startswith("/") and "{{" not in p for p in paths)
    for expected in ("/etc/systemd/system/sglang-molecule-tiny.service",
                     "/etc/systemd/system/nvidia-persistenced.service",
                     "/var/lib/dpkg/status", "/etc/passwd", "/etc/group",
                     "/etc/gpufleet/sglang/credentials/api-key",
                     "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources",
                     "/opt/sglang/venv/bin/python",
                     "/var/lib/gpufleet/sglang/deployment-molecule-tiny.md"):
        assert expected in paths
    assert any(p.endswith("/srt/distributed/device_communicators/torch_symm_mem.py") for p in paths)
    # Reads (stat, slurp) and controller-side writes (the smoke report) are not floor resources.
    assert not any("smoke-reports" in p for p in paths)
    assert 30 <= len(paths) <= 50

    gpu_args, smoke_args = noop_floor.floor_inputs(ledger)
    assert gpu_args["probe"] == "sysfs"
    assert (gpu_args["sysfs_root"], gpu_args["procfs_root"]) == ("/sys", "/proc")
    # molecule/default/group_vars/llm_servers/openai_smoke_test.yml and models.yml, as the checks call used them.
    assert smoke_args["checks"] == ["models", "chat", "reasoning", "stream", "concurrency"]
    assert smoke_args["base_url"] == "http://127.0.0.1:30001"
    assert smoke_args["served_model_name"] == "molecule-tiny"
    assert (smoke_args["timeout"], smoke_args["max_tokens"]) == (30, 256)
    assert "wait_timeout" not in smoke_args and smoke_args["api_key"].startswith("{{ llm_server_api_key")

    play = noop_floor.floor_play(paths, gpu_args, smoke_args, ["!all", "!min", "distribution", "platform"])
    tasks = play[0]["tasks"]
    assert [next(k for k in t if "." in k) for t in tasks] == [
        "ansible.builtin.setup", "ansible.builtin.stat", "gpufleet.llm_server.gpu_info",
        "gpufleet.llm_server.openai_smoke_test"]
    assert tasks[1]["loop"] == paths
    # The generated file is a playbook Ansible's YAML loader reads back unchanged.
    assert yaml.safe_load(noop_floor.dump_yaml(play)) == play


def test_floor_needs_the_smoke_checks_call(ledger):
    def is_checks_call(entry):
        return entry["action"].endswith("openai_smoke_test") and any(a.get("checks") for a in entry.get("module_args") or [])

    without_checks = [e for e in ledger if not is_checks_call(e)]
    with pytest.raises(ValueError, match="openai_smoke_test checks"):
        noop_floor.floor_inputs(without_checks)


def test_ratios_and_table():
    figures = {run: {"wall_s": wall, "controller_cpu_s": cpu, "host_cpu_s": host,
                     "tasks": {"ran": {"S": 1, "R": 2, "C": 3}, "skipped": {"S": 0, "R": 0, "C": 4}}}
               for run, wall, cpu, host in (("A", [80.0, 74.0, 180.0], [30.0, 28.0, 33.0], [33.0, 32.0, 37.0]),
                                            ("F", [20.0, 15.0, 40.0], [4.0, 4.0, 4.5], [10.0, 9.5, 10.0]),
                                            ("T", [16.0, 22.0, 18.0], [7.0, 8.0, 8.0], [None, None, None]),
                                            ("R", [8.0, 7.0, 9.0], [2.0, 2.0, 2.0], [None, None, None]))}
    out = noop_floor.ratios(figures)
    assert out["A/F"] == {"min": 4.93, "median": 4.0, "rounds": [4.0, 4.93, 4.5], "median_of_rounds": 4.5,
                          "cpu": round(63.0 / 14.0, 2)}
    assert out["T/R"] == {"min": 2.29, "median": 2.25, "rounds": [2.0, 3.14, 2.0], "median_of_rounds": 2.0,
                          "cpu": None}
    table = noop_floor.format_table(figures)
    assert "A no-op site.yml" in table and "74.0/80.0" in table and "1/2/3" in table and "n/a" in table


def test_task_ledger_on_a_real_play(tmp_path):
    """ansible-playbook with the callback enabled as noop_floor.py enables it, the default stdout kept."""
    play = yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Read a file", "ansible.builtin.stat": {"path": str(tmp_path)}},
        {"name": "Make two files", "loop": ["a", "b"],
         "ansible.builtin.copy": {"content": "x\n", "dest": f"{tmp_path}/{{{{ item }}}}", "mode": "0644"}},
        {"name": "Read-only command", "ansible.builtin.command": "true", "changed_when": False},
        {"name": "Skipped", "ansible.builtin.debug": {"msg": "x"}, "when": False},
        {"name": "On the controller", "ansible.builtin.stat": {"path": "/"}, "delegate_to": "localhost"},
        {"name": "Fails, ignored", "ansible.builtin.fail": {"msg": "no"}, "ignore_errors": True},
    ]}])
    ledger = tmp_path / "ledger.jsonl"
    proc = run_playbook(tmp_path, play, args=("-e", f"ansible_python_interpreter={sys.executable}"),
                        callback="ansible.builtin.default", timeout=300,
                        env={"ANSIBLE_CALLBACK_PLUGINS": str(BENCHMARKS / "callback_plugins"),
                             "ANSIBLE_CALLBACKS_ENABLED": "task_ledger", "GPUFLEET_TASK_LEDGER": str(ledger),
                             "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert proc.rc == 0, proc.stdout + proc.stderr
    assert "PLAY RECAP" in proc.stdout
    entries = noop_floor.load_ledger(ledger)
    by_task = {e["task"]: e for e in entries}
    assert [e["task"] for e in entries] == ["Read a file", "Make two files", "Read-only command", "Skipped",
                                            "On the controller", "Fails, ignored"]
    assert (by_task["Read a file"]["class"], by_task["Read a file"]["status"]) == ("R", "ok")
    made = by_task["Make two files"]
    assert (made["class"], made["status"], made["items"]) == ("S", "changed", 2)
    assert [t["dest"] for t in made["targets"]] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert by_task["Read-only command"]["class"] == "R"
    assert (by_task["Skipped"]["status"], by_task["Skipped"]["class"]) == ("skipped", "C")
    assert (by_task["On the controller"]["class"], by_task["On the controller"]["delegated_to"]) == ("C", "localhost")
    assert by_task["Fails, ignored"]["status"] == "failed" and by_task["Fails, ignored"]["ignored"] is True
    assert noop_floor.floor_resources(entries)[0] == [f"{tmp_path}/a", f"{tmp_path}/b"]
