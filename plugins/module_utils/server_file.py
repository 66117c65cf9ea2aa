# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a file the server reads (unit, environment file) and mark its restart pending in the same step.

The logic of the server_file module: compare, mark (restart_marker.mark, before the file changes),
write through a temporary file in the same directory and atomic_move, then apply owner/group/mode.
"""

from __future__ import annotations

import os
import tempfile

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def run_server_file(module, params):
    """The server_file module's work, given an AnsibleModule (I/O, check and diff mode)."""
    dest = params["dest"]
    directory = os.path.dirname(dest) or "."
    if not os.path.isdir(directory) and not module.check_mode:
        # (In check mode an earlier task of the same run would have created it.)
        module.fail_json(msg="server_file: the directory %s of dest=%s does not exist on this host. Create it first "
                             "(ansible.builtin.file state=directory) or fix dest." % (directory, dest), changed=False)
    new = params["content"].encode("utf-8")
    before = read_bytes(dest) if os.path.isdir(directory) else None
    content_changed = before != new
    result = {"changed": content_changed, "dest": dest, "content_changed": content_changed, "restart_marked": False}
    if content_changed and module._diff:
        result["diff"] = {"before_header": dest, "after_header": dest,
                          "before": before.decode("utf-8", errors="replace") if before is not None else "",
                          "after": params["content"]}
    if content_changed and not module.check_mode:
        result["restart_marked"] = maybe_mark(module, params["restart_marker"], params["restart_source"],
                                              params["restart_reason"] or "%s changed" % dest)
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(dest), dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(new)
                handle.flush()
                os.fsync(handle.fileno())
            module.atomic_move(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if os.path.exists(dest) or not module.check_mode:
        file_args = module.load_file_common_arguments(dict(path=dest, owner=params["owner"], group=params["group"],
                                                           mode=params["mode"]))
        if module.set_fs_attributes_if_different(file_args, result["changed"]):
            result["changed"] = True
    return result
