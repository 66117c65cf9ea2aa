"""Benchmark callback: the controller's CPU seconds between one task start and the next, one JSON line per task.

Not part of the collection's plugins (like task_ledger.py beside it). Enable it for one run:

    ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins ANSIBLE_CALLBACKS_ENABLED=cpu_ledger \
    GPUFLEET_CPU_LEDGER=/tmp/cpu.jsonl ansible-playbook ...

At every task start it reads getrusage(SELF) and getrusage(CHILDREN) of ansible-playbook and writes what the
previous task cost: `self` (the main process: variables, queueing, results) and `children` (its workers, and the
docker or ssh client processes they ran). A worker's CPU is counted when the main process reaps it, which is often
during the next task: per task the split is approximate, per role and per run the sums are right
(docs/performance.md, "Where the controller's CPU goes").
"""

from __future__ import annotations

import json
import os
import resource
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: cpu_ledger
type: aggregate
short_description: the controller's CPU seconds per task (benchmarks, issue 20)
description:
  - Appends one JSON object per task to the file named by E(GPUFLEET_CPU_LEDGER).
options:
  ledger_file:
    description: The JSON-lines file to append to.
    env:
      - name: GPUFLEET_CPU_LEDGER
    required: true
"""


def cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user + system CPU seconds so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cpu_ledger"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = None
        self._current = None  # (task name, role, start time, cpu_seconds() at its start)
        self._status: dict[str, str] = {}

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self._path = self.get_option("ledger_file") or os.environ.get("GPUFLEET_CPU_LEDGER")

    def _close_current(self) -> tuple[float, float]:
        now = cpu_seconds()
        if self._current and self._path:
            name, role, started, (own, children) = self._current
            entry = {"task": name, "role": role, "self": round(now[0] - own, 4),
                     "children": round(now[1] - children, 4), "wall": round(time.monotonic() - started, 3),
                     "status": self._status.get(name, "unknown")}
            with open(self._path, "a", encoding="utf-8") as ledger:
                ledger.write(json.dumps(entry) + "\n")
        return now

    def v2_playbook_on_task_start(self, task, is_conditional):
        now = self._close_current()
        role = task._role.get_name(include_role_fqcn=False) if task._role else None
        self._current = (task.get_name(), role, time.monotonic(), now)

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_runner_on_ok(self, result):
        self._status[result._task.get_name()] = "ok"

    def v2_runner_on_skipped(self, result):
        self._status.setdefault(result._task.get_name(), "skipped")

    def v2_playbook_on_stats(self, stats):
        self._close_current()
        self._current = None
