#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_manifest
short_description: Check a model directory against its manifest, one stat per file
version_added: "0.1.0"
description:
  - Reads C(<path>/.gpufleet-manifest.json), the manifest the C(gpufleet.llm_server.model_download) role
    writes after a verified download (file names, sizes and the Hub's sha256 of LFS files), and compares
    the size of every listed file with it. A missing, truncated or grown file is reported by name.
  - It does not hash anything (the role's O(ignore:model_download_verify=sha256) does that, with
    progress) and never contacts the Hub.
  - Without a manifest, the state says whether one can be built (V(no_manifest), O(hub_repo) given) or the
    model cannot be verified at all (V(unverifiable), for example a model copied by hand with no
    O(hub_repo)); the latter is reported as a warning unless O(warn_unverifiable=false).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.attributes.read_only
options:
  path:
    description: The model directory (the profile's C(model_path)).
    type: path
    required: true
  hub_repo:
    description:
      - The Hugging Face repo the files come from. Empty when the model is provided otherwise.
      - A manifest for another repo (or O(hub_revision)) gives state V(other_source).
    type: str
    default: ""
  hub_revision:
    description: The revision the profile asks for (branch, tag or commit), compared with the manifest's.
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
    description: Writes the manifest; its README describes the verification modes.
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

- name: Stop when a file is missing or truncated
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
    - V(complete) every listed file is present with the manifest's size; V(incomplete) some are not
      (see RV(problems)); V(no_manifest) there is no usable manifest and O(hub_repo) can build one;
      V(other_source) the manifest is for another repo or revision; V(unverifiable) no manifest and no
      O(hub_repo).
  returned: always
  type: str
  sample: incomplete
msg:
  description: One line saying what was found, naming files and sizes.
  returned: always
  type: str
problems:
  description: Files that are missing, not regular files, or of the wrong size.
  returned: always
  type: list
  elements: dict
  contains:
    path: {description: File path inside the model directory., type: str, sample: model-00002-of-00006.safetensors}
    reason: {description: "C(missing), C(not a file) or C(size).", type: str}
    have: {description: Size on disk (null when missing)., type: int}
    want: {description: Size in the manifest., type: int}
manifest:
  description: The manifest's source and verification (null without a usable manifest).
  returned: always
  type: dict
  contains:
    repo: {description: Hub repo., type: str}
    revision: {description: Revision the profile asked for when it was written., type: str}
    commit: {description: Commit the revision resolved to., type: str}
    verified: {description: "C(size) or C(sha256): the strongest check the files passed.", type: str}
    verified_at: {description: When the files last passed it (UTC)., type: str}
manifest_path:
  description: Where the manifest is (or would be).
  returned: always
  type: str
files:
  description: Number of files the manifest lists.
  returned: always
  type: int
bytes:
  description: Total size of the files the manifest lists.
  returned: always
  type: int
bytes_present:
  description:
    - Bytes of the listed files that are present with the right size; without a usable manifest, the
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
            "hub_repo": {"type": "str", "default": ""},
            "hub_revision": {"type": "str", "default": "main"},
            "warn_unverifiable": {"type": "bool", "default": True},
            "stray_files": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    result = check(module.params["path"], hub_repo=module.params["hub_repo"] or "",
                   hub_revision=module.params["hub_revision"] or "main")
    for warning in result.pop("warnings"):
        module.warn(warning)
    if result["state"] == "unverifiable" and module.params["warn_unverifiable"]:
        module.warn(result["msg"])
    result["stray_files_present"] = present_entries(module.params["path"], module.params["stray_files"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
