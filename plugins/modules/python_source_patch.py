#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: python_source_patch
short_description: Ensure entries exist in a dict literal of a Python source file
version_added: "0.1.0"
description:
  - Ensures that a dict literal assigned to a name in a Python file holds the given entries.
    The dict may be bound at module level (O(symbol=NAME)) or as an attribute of a top-level class
    (O(symbol=Class.NAME)).
  - The dict is located through the file's AST. A missing entry is inserted as text right after the
    dict's last entry, in the dict's own layout (one entry per line or inline, trailing comma or
    not), so every other byte of the file, comments and formatting included, stays as it was.
  - An entry whose key already exists is never changed; the result reports it under RV(existing)
    with the value found and whether it equals the wanted one.
  - The edited text is compiled before it is written; the file is replaced atomically and a
    timestamped backup of the previous version is kept next to it (O(backup)).
  - When neither O(symbol) nor any of O(alternatives) is found (renamed or moved upstream), the module
    fails naming each file, each symbol and the dict literals the files hold instead; no file is
    written.
  - With an empty O(entries) list the module only reads the dict and reports its keys.
author:
  - gpufleet maintainers (@gpufleet)
options:
  path:
    description:
      - The Python file holding the dict (with O(follow_imports=true), the file that reads it).
    type: path
    required: true
  symbol:
    description:
      - The name the dict literal is assigned to, V(NAME) at module level or V(Class.NAME) for a class
        attribute of a top-level class (plain or annotated assignment).
    type: str
    required: true
  alternatives:
    description:
      - Other places the same dict lived in other versions of the file's project, tried in order
        when O(symbol) is not bound in O(path) (for example because the file does not exist).
      - The first candidate whose file exists and binds the symbol wins. A candidate that binds the
        symbol to something other than one dict literal is an error, not a reason to try the next.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: File of this candidate; defaults to O(path).
        type: path
      symbol:
        description: Symbol of this candidate, as in O(symbol).
        type: str
        required: true
  follow_imports:
    description:
      - Treat O(path) (and each alternative's path) as the file that B(reads) the dict at run time, and
        patch the dict that file really uses - its own module-level definition, or the one it imports
        with C(from M import NAME [as ALIAS]), followed through further such imports. Absolute module
        names are looked up under the nearest parent directory named after their first component;
        relative imports from the file's own directory.
      - A name the reader binds more than once, only conditionally (inside C(if)/C(try)/C(with)/a loop),
        by a star import, or to anything but a dict literal (a call, a module) is refused, naming the files
        involved; nothing is written.
      - The edited text is followed again before it is written. When the table the reader would use is not
        the one patched (or lacks an added key), the module fails naming both files and writes nothing.
    type: bool
    default: false
  copies:
    description:
      - Other files where an older copy of the same dict may still be defined (where it lived before it
        moved), used with O(follow_imports=true). A copy that the reader does not use is reported in
        RV(stale_copies) with a warning naming both files, and left unchanged.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: File that may hold a copy.
        type: path
        required: true
      symbol:
        description: Symbol of the copy; defaults to the symbol of the dict that is patched.
        type: str
  entries:
    description:
      - Entries that must exist. Keys and values are Python source text (literals or expressions
        such as V(64 * MiB)), inserted verbatim; keys are compared by value (V(12) matches C(12) but
        not C('12')).
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: The key as Python source, for example V(12).
        type: str
        required: true
      value:
        description: The value as Python source, for example V([4, 6, 8]). Mutually exclusive with O(entries[].value_from_key).
        type: str
      value_from_key:
        description:
          - Copy the value text of this other key of the same dict (as Python source, for example V(10)).
            Fails when that key does not exist. Mutually exclusive with O(entries[].value).
        type: str
  backup:
    description:
      - Keep a timestamped copy of the file next to it before changing it.
    type: bool
    default: true
  restart_marker:
    description:
      - Restart-pending marker file (see M(gpufleet.llm_server.server_file)) to append a line to before the
        patched file is written, so a running server's restart is never lost when a later task fails.
        Empty or omitted, none is written.
    type: path
    version_added: "0.1.0"
  restart_source:
    description: Who wrote the marker line.
    type: str
    default: python_source_patch
    version_added: "0.1.0"
  restart_reason:
    description: Why a restart is pending; defaults to the keys added and the file.
    type: str
    version_added: "0.1.0"
attributes:
  check_mode:
    support: full
    description: Reports what would be inserted without writing.
  diff_mode:
    support: full
    description: Shows the text before and after.
  platform:
    support: full
    platforms: posix
    description: Plain file edits; runs on the target's Python 3.11+ with the standard library only.
notes:
  - Only dicts bound by a top-level statement (of the module or of a top-level class body) are
    found; a dict bound inside a function or an C(if) block is not.
  - The file is read and written as UTF-8, keeping its line endings.
seealso:
  - name: SM120 patches
    description: How the gpufleet.llm_server.sglang_sm120_patch role uses this module (docs/sm120-patches.md).
    link: https://github.com/gpufleet/llm_server/blob/main/docs/sm120-patches.md
"""

EXAMPLES = r"""
- name: Add capability 12 to SGLang's symmetric-memory size table (copy key 10's sizes)
  gpufleet.llm_server.python_source_patch:
    path: /opt/sglang/src/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py
    symbol: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
    alternatives:
      - symbol: SYMM_MEM_ALL_REDUCE_MAX_SIZES
    entries:
      - key: "12"
        value_from_key: "10"

- name: Add capability 12 to a class attribute with an explicit value
  gpufleet.llm_server.python_source_patch:
    path: /opt/sglang/src/python/sglang/srt/distributed/device_communicators/torch_symm_mem.py
    symbol: TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM
    entries:
      - key: "12"
        value: "[4, 6, 8]"

- name: Patch the size table that torch_symm_mem.py really reads (its import, or its own definition)
  gpufleet.llm_server.python_source_patch:
    path: /opt/sglang/current/src/python/sglang/srt/distributed/device_communicators/torch_symm_mem.py
    symbol: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
    follow_imports: true
    copies:
      - path: /opt/sglang/current/src/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py
    entries:
      - key: "12"
        value_from_key: "10"

- name: Read the keys only
  gpufleet.llm_server.python_source_patch:
    path: /opt/sglang/src/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py
    symbol: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
  register: sizes
"""

RETURN = r"""
path:
  description: The file that holds the dict (O(path) or the alternative that was found).
  returned: success
  type: str
  sample: /opt/sglang/src/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py
symbol:
  description: The symbol that was found (O(symbol) or an alternative's).
  returned: success
  type: str
  sample: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
alternative:
  description: Index in O(alternatives) of the candidate used, or C(null) when O(symbol) in O(path) was found.
  returned: success
  type: int
  sample: null
added:
  description: Entries inserted (or, in check mode, that would be), with the value text used.
  returned: success
  type: list
  elements: dict
  sample: [{"key": "12", "value": "[6, 8]"}]
existing:
  description:
    - Entries whose key was already present and left as found, with the value found, the value
      wanted and whether both are equal.
  returned: success
  type: list
  elements: dict
  sample: [{"key": "12", "value": "[6, 8]", "wanted": "[6, 8]", "matches": true}]
read_by:
  description:
    - With O(follow_imports=true), the file and symbol that read the dict at run time (the candidate that
      was found); RV(path) and RV(symbol) name the definition that was patched. C(null) otherwise.
  returned: success
  type: dict
  sample: {"path": "/opt/sglang/.../torch_symm_mem.py", "symbol": "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"}
chain:
  description: The import hops followed from RV(read_by) to RV(path) (empty for a local definition).
  returned: success
  type: list
  elements: str
  sample: [".../torch_symm_mem.py line 9 imports TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES from .../all_reduce_utils.py"]
stale_copies:
  description: Copies of the dict in O(copies) that the reader does not use (left unchanged), with their keys.
  returned: success
  type: list
  elements: dict
  sample: [{"path": ".../all_reduce_utils.py", "symbol": "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "line": 3, "keys": [9, 10]}]
keys:
  description:
    - The dict's keys as source text, in file order, read back from the file after the write
      (in check mode, as the file is now).
  returned: success
  type: list
  elements: str
  sample: ["9", "10", "12"]
literal_keys:
  description: The same keys as values where they are simple literals (integers stay integers), else as source text.
  returned: success
  type: list
  elements: raw
  sample: [9, 10, 12]
restart_marked:
  description: Whether a line was appended to O(restart_marker).
  returned: success
  type: bool
  sample: true
backup_file:
  description: The backup written before the change.
  returned: when changed, not in check mode, and O(backup=true)
  type: str
  sample: /opt/sglang/src/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py.1234.2026-11-29@10:00:00~
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.python_source_patch import (
    PatchError,
    listed_keys,
    run_patch,
)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark


def write_patched(module, path, text):
    """Write TEXT over PATH through a temporary file in its directory and atomic_move."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def apply_patch(module, params, patch):
    """Warn, mark the restart, back up and write what run_patch computed; return the module's result."""
    result = patch["result"]
    path, symbol = result["path"], result["symbol"]
    for warning in patch["warnings"]:
        module.warn(warning)
    if result["changed"] and module._diff:
        result["diff"] = patch["diff"]
    result["restart_marked"] = False
    data = patch["before"]
    if result["changed"] and not module.check_mode:
        if params.get("restart_marker"):
            result["restart_marked"] = maybe_mark(module, params["restart_marker"], params.get("restart_source")
                                                  or "python_source_patch", params.get("restart_reason") or result["msg"])
        if params["backup"]:
            result["backup_file"] = module.backup_local(path)
        write_patched(module, path, patch["after"])
        with open(path, "rb") as handle:
            data = handle.read()  # report what is on disk now, re-parsed
    result.update(listed_keys(data, symbol, path))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            symbol=dict(type="str", required=True),
            alternatives=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path"),
                symbol=dict(type="str", required=True),
            )),
            entries=dict(type="list", elements="dict", default=[], options=dict(
                key=dict(type="str", required=True, no_log=False),
                value=dict(type="str"),
                value_from_key=dict(type="str", no_log=False),
            ), mutually_exclusive=[("value", "value_from_key")], required_one_of=[("value", "value_from_key")]),
            follow_imports=dict(type="bool", default=False),
            copies=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                symbol=dict(type="str"),
            )),
            backup=dict(type="bool", default=True),
            restart_marker=dict(type="path"),
            restart_source=dict(type="str", default="python_source_patch"),
            restart_reason=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    try:
        patch = run_patch(module.params)
        result = apply_patch(module, module.params, patch)
    except PatchError as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
