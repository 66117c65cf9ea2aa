#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_manifest
short_description: Check a model directory against its record, one stat per file
version_added: "0.1.0"
description:
  - Reads the record the C(gpufleet.llm_server.model_download) role writes after it hashed every file of a
    model, kept outside the model directory (under O(record_dir), root-owned), and compares every recorded
    file's size, inode, mtime and ctime with it. A missing, truncated or grown file, and a file replaced or
    edited since it was hashed (even with its mtime put back, since the ctime changes), is reported by name.
  - Lists the files the server would load (weights, C(*.py) remote code, configs) that the record does not
    list, in RV(stray) (state V(stray) when they are the only finding), unless O(allow_extra) allows them.
  - It does not hash anything (the role's helper does, for the files reported here) and never contacts the Hub.
  - Without a record, the state says whether one can be built (V(no_manifest), O(hub_repo) given), whether
    the directory had one that is gone (V(record_lost), no O(hub_repo)), or whether the model was never
    recorded (V(unverifiable)); the latter is reported as a warning unless O(warn_unverifiable=false).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.attributes.read_only
options:
  path:
    description: The model directory (the profile's C(model_path)).
    type: path
    required: true
  record_dir:
    description:
      - Directory of the records (C(model_download_record_dir)); the record of O(path) is a file there named
        after the path.
    type: path
    default: /var/lib/gpufleet/models
    version_added: "0.2.0"
  allow_extra:
    description:
      - Glob patterns (matched against the path inside O(path) and against the base name) of files that may be
        there without being recorded (C(model_download_allowed_extra_files)).
    type: list
    elements: str
    default: []
    version_added: "0.2.0"
  hub_repo:
    description:
      - The Hugging Face repo the files come from. Empty when the model is provided otherwise.
      - A record for another repo (or O(hub_revision)) gives state V(other_source).
    type: str
    default: ""
  hub_revision:
    description: The revision the profile asks for (branch, tag or commit), compared with the record's.
    type: str
    default: main
  warn_unverifiable:
    description: Emit a warning when the state is V(unverifiable).
    type: bool
    default: true
  stray_files:
    description:
      - Names, relative to O(path), that should not be there (files an older version of the role left behind);
        the ones that exist are returned in RV(stray_files_present), so the role removes them only then.
    type: list
    elements: str
    default: []
    version_added: "0.2.0"
seealso:
  - name: The model_download role
    description: Writes the record; its README describes the checks.
    link: https://github.com/gpufleet/llm_server/blob/main/roles/model_download/README.md
attributes:
  platform:
    support: full
    platforms: posix
    description: Reads files only.
"""

EXAMPLES = r"""
- name: Check the model files (one stat per file)
  gpufleet.llm_server.model_manifest:
    path: /shared/Qwen3.5-397B-A17B-NVFP4
    hub_repo: nvidia/Qwen3.5-397B-A17B-NVFP4
    hub_revision: main
  register: model_check

- name: Stop when a file is missing, changed, or a stray file would be loaded
  ansible.builtin.assert:
    that: model_check.state == 'complete'
    fail_msg: "{{ model_check.msg }}"
"""

RETURN = r"""
stray_files_present:
  description: The names of O(stray_files) that exist in O(path).
  returned: always
  type: list
  elements: str
  sample: [.gpufleet-hf-token]
state:
  description:
    - V(complete) every recorded file is as it was when hashed and no stray file is there; V(incomplete) some
      are not (see RV(problems)); V(stray) the recorded files are fine but RV(stray) is not empty;
      V(no_manifest) there is no usable record and O(hub_repo) can build one; V(record_lost) no record, no
      O(hub_repo), but the directory was recorded before; V(other_source) the record is for another repo or
      revision; V(unverifiable) never recorded and no O(hub_repo).
  returned: always
  type: str
  sample: incomplete
msg:
  description: One line saying what was found, naming files, and the fix where one is needed.
  returned: always
  type: str
problems:
  description: Recorded files that are missing, not regular files, of the wrong size, or changed since hashed.
  returned: always
  type: list
  elements: dict
  contains:
    path: {description: File path inside the model directory., type: str, sample: model-00002-of-00006.safetensors}
    reason: {description: "C(missing), C(not a file), C(size) or C(changed) (inode, mtime or ctime).", type: str}
    have: {description: Size on disk (null when missing)., type: int}
    want: {description: Size in the record., type: int}
stray:
  description: Files the server would load that the record does not list and O(allow_extra) does not allow.
  returned: always
  type: list
  elements: str
  sample: [model-00003-of-00002.safetensors, modeling_evil.py]
stray_msg:
  description: What RV(stray) means and the fix.
  returned: when RV(stray) is not empty
  type: str
manifest:
  description: The record's source and verification (null without a usable record).
  returned: always
  type: dict
  contains:
    repo: {description: Hub repo (null for adopted files)., type: str}
    revision: {description: Revision the profile asked for when it was written., type: str}
    commit: {description: Commit the revision resolved to., type: str}
    source: {description: "C(hub) (checked against the Hub's hashes) or C(adopted) (hashed as found).", type: str}
    verified: {description: "C(sha256): every recorded file was hashed.", type: str}
    verified_at: {description: When the record was last written (UTC)., type: str}
manifest_path:
  description: Where the record is (or would be).
  returned: always
  type: str
files:
  description: Number of files the record lists.
  returned: always
  type: int
bytes:
  description: Total size of the files the record lists.
  returned: always
  type: int
bytes_present:
  description:
    - Bytes of the recorded files that are present with the right size; without a usable record, the
      size of every file in the directory (huggingface_hub's C(.cache) excepted).
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.model_manifest import check, present_entries


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "record_dir": {"type": "path", "default": "/var/lib/gpufleet/models"},
            "allow_extra": {"type": "list", "elements": "str", "default": []},
            "hub_repo": {"type": "str", "default": ""},
            "hub_revision": {"type": "str", "default": "main"},
            "warn_unverifiable": {"type": "bool", "default": True},
            "stray_files": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    result = check(module.params["path"], hub_repo=module.params["hub_repo"] or "",
                   hub_revision=module.params["hub_revision"] or "main", record_dir=module.params["record_dir"],
                   allow_extra=module.params["allow_extra"])
    for warning in result.pop("warnings"):
        module.warn(warning)
    if result["state"] == "unverifiable" and module.params["warn_unverifiable"]:
        module.warn(result["msg"])
    result["stray_files_present"] = present_entries(module.params["path"], module.params["stray_files"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
