#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: restart_marker
short_description: Mark a server's restart pending on the host, or read the marker
version_added: "0.1.0"
description:
  - The restart-pending marker says "the server on this host runs older code or settings than the disk". It is
    a file on the host, so it outlives a failed run (handlers do not); the server's unit removes it at its next
    start (C(ExecStartPre)), the event that picks the change up.
  - V(present) appends one line (time, O(source), O(reason)) to O(path); use it right BEFORE a change the module
    making it cannot mark itself (M(gpufleet.llm_server.server_file), M(gpufleet.llm_server.systemd_credential),
    M(gpufleet.llm_server.python_source_patch) and M(gpufleet.llm_server.sglang_dependencies) mark in the same step).
  - V(query) only reads it.
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description: The marker file (created 0600 in a 0700 directory).
    type: path
    required: true
  state:
    description: V(present) appends a line; V(query) reads.
    type: str
    choices: [present, query]
    default: present
  source:
    description: Who marks (a role name).
    type: str
    default: restart_marker
  reason:
    description: What changed. Required with O(state=present).
    type: str
attributes:
  check_mode:
    support: full
    description: With O(state=present) reports changed and writes nothing.
  diff_mode:
    support: none
    description: The marker is a log of reasons, not managed content.
  platform:
    support: full
    platforms: posix
    description: Plain file appends (O_APPEND, fsync); standard library only.
seealso:
  - module: gpufleet.llm_server.server_file
"""

EXAMPLES = r"""
- name: Mark the restart pending before switching the build link
  gpufleet.llm_server.restart_marker:
    path: /var/lib/gpufleet/sglang/restart-pending
    source: sglang_build
    reason: current now points at build 1a2b3c4

- name: Read the marker
  gpufleet.llm_server.restart_marker:
    path: /var/lib/gpufleet/sglang/restart-pending
    state: query
  register: pending
"""

RETURN = r"""
pending:
  description: Whether the marker exists (after the module ran).
  returned: always
  type: bool
  sample: true
entries:
  description: The marker's lines, oldest first.
  returned: always
  type: list
  elements: dict
  sample: [{"at": "2026-12-01T12:00:00.000000Z", "source": "sglang_sm120_patch", "reason": "12 added"}]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark, read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "query"], default="present"),
            source=dict(type="str", default="restart_marker"),
            reason=dict(type="str"),
        ),
        required_if=[("state", "present", ("reason",))],
        supports_check_mode=True,
    )
    p = module.params
    changed = False
    if p["state"] == "present":
        maybe_mark(module, p["path"], p["source"], p["reason"])
        changed = True
    module.exit_json(changed=changed, pending=os.path.exists(p["path"]) or (changed and module.check_mode),
                     entries=read(p["path"]))


if __name__ == "__main__":
    main()
