#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_progress
short_description: Wait for a background job on the target, printing its progress while it runs
version_added: "0.1.0"
description:
  - Runs O(command) on the target every O(poll) seconds (first after 1, 2, 4, ... seconds) and prints
    the job's progress line in the play output whenever it changed, for example
    C(downloading 37.2 GB of 223.1 GB (16.7 %), 112.0 MB/s, 3 of 19 files done, about 27 min left).
  - O(command) must print one JSON object per call, as its last line - C(state) (V(running), V(done),
    V(failed) or V(lost)), C(line) (the progress line), and C(result) (a dict, when done; its C(changed)
    becomes the task's) or C(msg) (when failed or lost). The model_download role's helper
    (C(hf_download.py status)) is such a command.
  - The task fails when the job fails, is lost (its process is gone without a result), or still runs
    after O(timeout) seconds (the job itself keeps running then).
  - This is an action plugin; the remote side is one plain command per poll, no module payload.
author:
  - gpufleet maintainers (@gpufleet)
options:
  command:
    description: Argument vector of the status command (quoted for the remote shell by the plugin).
    type: list
    elements: str
    required: true
  poll:
    description: Seconds between status reads (and at most one progress line per read).
    type: int
    default: 30
  timeout:
    description: Give up waiting after this many seconds.
    type: int
    default: 86400
  label:
    description: Prefix of every progress line (default the inventory host name).
    type: str
    default: ""
attributes:
  action:
    support: full
    description: Runs on the controller; the target only answers the status command.
  async:
    support: none
    description: It is itself the wait for a background job.
  check_mode:
    support: full
    description: Skipped in check mode (no job runs then).
  diff_mode:
    support: none
    description: Changes nothing itself.
  platform:
    support: full
    platforms: posix
    description: Runs the status command through the connection's shell.
"""

EXAMPLES = r"""
- name: Wait for the model download, with one progress line per 30 s
  gpufleet.llm_server.job_progress:
    command: [/opt/sglang/venv/bin/python, /usr/local/lib/gpufleet-hf-download.py, status, --dir, /shared/model]
    poll: 30
    timeout: 86400
"""

RETURN = r"""
state:
  description: Final state reported by the job (V(done), V(failed), V(lost)).
  returned: always
  type: str
line:
  description: The job's last progress line.
  returned: always
  type: str
job_result:
  description: The job's C(result) when done.
  returned: success
  type: dict
status:
  description: The last status object, as printed by O(command).
  returned: always
  type: dict
elapsed:
  description: Seconds waited.
  returned: always
  type: float
"""
