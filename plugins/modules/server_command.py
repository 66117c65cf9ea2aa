#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_command
short_description: Run a command that changes what a server runs, with its restart marked pending in the same step
version_added: "0.1.0"
description:
  - Runs O(argv) (no shell) like M(ansible.builtin.command) with O(ansible.builtin.command#module:argv), for
    steps that change the code a running server uses (a C(pip install) into its venv, a checkout switch).
  - Appends a line to the restart-pending marker O(restart_marker) before the command starts and again after
    it ends, so the change is marked even when the run dies during the command, and a server that restarted
    on its own while the command was still changing files (which clears the marker) is marked again.
  - Always reports changed; make the task conditional on the change being needed (the command is only run
    when it must be).
  - Fails when the command exits non-zero; the marker stays (the files may be half changed).
author:
  - gpufleet maintainers (@gpufleet)
options:
  argv:
    description: The command and its arguments.
    type: list
    elements: str
    required: true
  chdir:
    description: Directory to run the command in.
    type: path
  restart_marker:
    description: Restart-pending marker to append to. Empty or omitted, none is written.
    type: path
  restart_source:
    description: Who wrote the marker line.
    type: str
    default: server_command
  restart_reason:
    description: Why a restart is pending; defaults to the command line.
    type: str
attributes:
  check_mode:
    support: none
    description: The command is not run in check mode (the task is skipped, as for M(ansible.builtin.command)).
  diff_mode:
    support: none
    description: A command has no before/after text.
  platform:
    support: full
    platforms: posix
    description: Runs the command with the target's Python 3.11+ standard library.
seealso:
  - module: gpufleet.llm_server.server_file
"""

EXAMPLES = r"""
- name: Install SGLang from the checkout (the server runs this code after its next start)
  gpufleet.llm_server.server_command:
    argv: [/opt/sglang/venv/bin/python, -m, pip, install, --no-deps, --editable, /opt/sglang/src/python]
    restart_marker: /var/lib/gpufleet/sglang/restart-pending
    restart_source: sglang_build
    restart_reason: SGLang reinstalled from /opt/sglang/src
"""

RETURN = r"""
cmd:
  description: The command run.
  returned: always
  type: list
  elements: str
  sample: [/opt/sglang/venv/bin/python, -m, pip, install, --no-deps, --editable, /opt/sglang/src/python]
rc:
  description: Its exit status.
  returned: always
  type: int
  sample: 0
stdout:
  description: Its standard output.
  returned: always
  type: str
  sample: Successfully installed sglang-0.5.10.post1
stderr:
  description: Its standard error.
  returned: always
  type: str
  sample: ""
restart_marked:
  description: Whether the marker was written.
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            chdir=dict(type="path"),
            restart_marker=dict(type="path"),
            restart_source=dict(type="str", default="server_command"),
            restart_reason=dict(type="str"),
        ),
        supports_check_mode=False,
    )
    p = module.params
    if not p["argv"]:
        module.fail_json(msg="server_command: argv is empty; give the command and its arguments as a list")
    reason = p["restart_reason"] or " ".join(p["argv"])
    marked = maybe_mark(module, p["restart_marker"], p["restart_source"], reason)
    rc, out, err = module.run_command(p["argv"], cwd=p["chdir"])
    marked = maybe_mark(module, p["restart_marker"], p["restart_source"], reason + " (finished, rc=%d)" % rc) or marked
    result = dict(changed=True, cmd=p["argv"], rc=rc, stdout=out, stderr=err, restart_marked=marked)
    if rc != 0:
        module.fail_json(msg="%s exited with %d: %s" % (p["argv"][0], rc, (err or out or "").strip()[-2000:]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
