# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action for gpufleet.llm_server.job_progress (documentation: plugins/modules/job_progress.py).

Runs on the controller: asks the target for the job's status every `poll` seconds with one plain
remote command (no module payload) and prints the job's progress line while the task runs. A module
cannot do that: its output reaches the play only when it returns.
"""

from __future__ import annotations

import json
import shlex
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

ARGUMENT_SPEC = {
    "command": {"type": "list", "elements": "str", "required": True},
    "poll": {"type": "int", "default": 30},
    "timeout": {"type": "int", "default": 86400},
    "label": {"type": "str", "default": ""},
}


def parse_status(stdout):
    """The last line of STDOUT that is a JSON object, or None."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        if self._task.check_mode:
            result.update(skipped=True, changed=False, msg="check mode: no job was started, nothing to wait for")
            return result
        command = " ".join(shlex.quote(part) for part in args["command"])
        poll = max(1, args["poll"])
        label = args["label"] or (task_vars or {}).get("inventory_hostname", "")
        started = time.monotonic()
        deadline = started + max(1, args["timeout"])
        last_line = None
        wait = 1
        while True:
            answer = self._low_level_execute_command(command, sudoable=True)
            status = parse_status(answer.get("stdout"))
            if answer.get("rc") != 0 or status is None:
                result.update(failed=True, rc=answer.get("rc"), stdout=answer.get("stdout"),
                              stderr=answer.get("stderr"),
                              msg="job_progress: the status command %s failed (rc=%s): %s" % (
                                  command, answer.get("rc"), (answer.get("stderr") or answer.get("stdout") or "")
                                  .strip()[-2000:]))
                return result
            state = status.get("state")
            line = status.get("line")
            if line and line != last_line and state == "running":
                display.display("%s: %s [%ds]" % (label, line, time.monotonic() - started))
                last_line = line
            if state != "running":
                result.update(state=state, line=line, status=status, elapsed=round(time.monotonic() - started, 1),
                              job_result=status.get("result") or {})
                if state == "done":
                    result["changed"] = bool((status.get("result") or {}).get("changed"))
                    result["msg"] = line
                else:
                    result["failed"] = True
                    result["msg"] = status.get("msg") or "job_progress: the job ended in state %r" % state
                return result
            if time.monotonic() >= deadline:
                result.update(failed=True, state=state, line=line, status=status,
                              msg="job_progress: the job was still running after %d s (timeout); it keeps running "
                                  "on the target. Last progress: %s" % (args["timeout"], line))
                return result
            # Quick first looks (a job may take seconds), then one status per `poll` seconds.
            time.sleep(min(wait, poll))
            wait = min(wait * 2, poll)
