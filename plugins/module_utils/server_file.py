# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a file the server reads (unit, environment file) and mark its restart pending in the same step.

The logic of the server_file module: compare, mark (restart_marker.mark, before the file changes),
write through a temporary file in the same directory and atomic_move, then apply owner/group/mode;
for one file (dest/content) or several in one module run (files, each as one file would be).
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


FILE_KEYS = ("dest", "content", "owner", "group", "mode", "restart_reason")


def file_params(params):
    """One parameter set per file: O(files) entries inherit owner, group, mode and the marker settings of the call."""
    if not params.get("files"):
        return [params]
    shared = {key: params.get(key) for key in ("owner", "group", "mode", "restart_marker", "restart_source")}
    wanted = []
    for entry in params["files"]:
        one = dict(shared, restart_reason=None)
        one.update({key: value for key, value in entry.items() if key in FILE_KEYS and value is not None})
        # A file whose change needs no restart (restart: false) marks nothing.
        if entry.get("restart") is False:
            one["restart_marker"] = None
        wanted.append(one)
    return wanted


def run_server_files(module, params):
    """Several files in one module run: each as run_server_file writes it; one changed, per-file results."""
    wanted = file_params(params)
    # Every directory before any write: a call never leaves some files written and others not for this reason.
    directories = sorted({os.path.dirname(one["dest"]) or "." for one in wanted})
    missing = [directory for directory in directories if not os.path.isdir(directory)]
    if missing and not module.check_mode:
        module.fail_json(msg="server_file: the directories %s of files[].dest do not exist on this host; nothing was "
                             "written. Create them first (ansible.builtin.file state=directory) or fix dest."
                             % ", ".join(missing), changed=False)
    results = [run_server_file(module, one) for one in wanted]
    result = {"changed": any(r["changed"] for r in results), "files": results,
              "restart_marked": any(r["restart_marked"] for r in results),
              "content_changed": any(r["content_changed"] for r in results),
              "resources": [r["dest"] for r in results]}
    diffs = [r.pop("diff") for r in results if "diff" in r]
    if diffs:
        result["diff"] = diffs
    return result


def run_server_file(module, params):
    """The server_file module's work for one file, given an AnsibleModule (I/O, check and diff mode)."""
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
