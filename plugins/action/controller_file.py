# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action for gpufleet.llm_server.controller_file (documentation: plugins/modules/controller_file.py).

Writes a file on the controller inside the controller's own process: no connection and no module run.
ansible.builtin.copy delegated to localhost starts a module process for the same write (about a second
per host on a busy two-core controller: the smoke test's report, issue 20).
"""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "content": {"type": "str", "required": True},
    "mode": {"type": "raw", "default": "0644"},
    "directory_mode": {"type": "raw", "default": "0755"},
}


def octal(value, name):
    """An octal mode given as '0644', '644' or an int; the message names the option."""
    try:
        return int(value, 8) if isinstance(value, str) else int(value)
    except ValueError as error:
        raise AnsibleActionFail("controller_file: %s=%r is no octal mode; write it as a quoted string such as '0644'."
                                % (name, value)) from error


def write_file(dest, content, mode, directory_mode):
    """Write DEST (atomic rename; directories created) unless it holds CONTENT already; True when written."""
    data = content.encode("utf-8")
    try:
        with open(dest, "rb") as handle:
            same = handle.read() == data
    except FileNotFoundError:
        same = False
    if same and (os.stat(dest).st_mode & 0o7777) == mode:
        return False
    directory = os.path.dirname(dest) or "."
    os.makedirs(directory, mode=directory_mode, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(dest), dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        mode = octal(args["mode"], "mode")
        directory_mode = octal(args["directory_mode"], "directory_mode")
        try:
            written = write_file(args["dest"], args["content"], mode, directory_mode)
        except OSError as error:
            raise AnsibleActionFail("controller_file: cannot write %s on the controller: %s. Fix the path or its "
                                    "directory's permissions." % (args["dest"], error)) from error
        # Output for the operator (reports), not managed state: never "changed", written in check mode too.
        result.update(changed=False, dest=args["dest"], written=written)
        return result
