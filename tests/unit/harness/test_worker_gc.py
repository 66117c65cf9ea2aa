"""gpufleet.llm_server.worker_gc freezes the garbage collector in every task worker, and only there
(plugins/callback/worker_gc.py; issue 20).

Real ansible-playbook runs on localhost (tests/support/ansible_harness.py) and a real fork; no test double. A
test-only filter, rendered by the task worker, reports the worker's gc.get_freeze_count() and process id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from support.ansible_harness import run_playbook

WORKER_GC = "gpufleet.llm_server.worker_gc"
FILTER = '''
import gc
import os


def worker_gc(_value):
    return {"frozen": gc.get_freeze_count(), "pid": os.getpid()}


class FilterModule:
    def filters(self):
        return {"worker_gc": worker_gc}
'''
PLAY = [{"hosts": "localhost", "gather_facts": False, "tasks": [
    {"name": "first", "ansible.builtin.debug": {"msg": "{{ 0 | worker_gc }}"}},
    {"name": "second", "ansible.builtin.debug": {"msg": "{{ 0 | worker_gc }}"}}]}]


def worker_reports(tmp_path, callbacks: str | None) -> list[dict]:
    (tmp_path / "filter_plugins").mkdir(exist_ok=True)
    (tmp_path / "filter_plugins" / "worker_gc_probe.py").write_text(FILTER)
    env = {"ANSIBLE_FILTER_PLUGINS": str(tmp_path / "filter_plugins")}
    if callbacks is None:
        # ansible-core's defaults: an empty config file instead of the harness's, which enables this callback
        (tmp_path / "empty.cfg").write_text("")
        env["ANSIBLE_CONFIG"] = str(tmp_path / "empty.cfg")
    else:
        env["ANSIBLE_CALLBACKS_ENABLED"] = callbacks
    result = run_playbook(tmp_path, PLAY, env=env)
    assert result.rc == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return [task["msg"] for task in result.host_results("localhost")]


def test_every_task_worker_has_the_inherited_objects_frozen(tmp_path):
    reports = worker_reports(tmp_path, WORKER_GC)
    assert len(reports) == 2
    # Each task ran in its own worker, and each worker found the objects it inherited frozen.
    assert reports[0]["pid"] != reports[1]["pid"]
    assert all(report["frozen"] > 1000 for report in reports), reports


def test_without_the_callback_nothing_is_frozen(tmp_path):
    # The counterpart: ansible-core itself freezes nothing, so the figure above is the callback's doing.
    reports = worker_reports(tmp_path, None)
    assert [report["frozen"] for report in reports] == [0, 0], reports


def test_the_fork_handler_is_registered_once_and_leaves_the_parent_alone():
    # In a child interpreter: registering twice (two callback instances) must not stack handlers, and the parent's
    # own collector keeps every object (its freeze count stays 0) while a forked child's is frozen.
    script = textwrap.dedent("""
        import gc, json, os
        from ansible_collections.gpufleet.llm_server.plugins.callback import worker_gc
        worker_gc.register_worker_gc_freeze()
        worker_gc.register_worker_gc_freeze()
        worker_gc.CallbackModule()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write_end, json.dumps({"frozen": gc.get_freeze_count()}).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        child = json.loads(os.read(read_end, 65536))
        registrations = worker_gc.register_worker_gc_freeze.cache_info().misses
        print(json.dumps({"child": child, "parent_frozen": gc.get_freeze_count(), "registrations": registrations}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["parent_frozen"] == 0
    assert report["child"]["frozen"] > 1000
    assert report["registrations"] == 1
