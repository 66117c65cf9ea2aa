#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_dependencies
short_description: Install SGLang's declared dependencies into a Python environment, holding its torch
version_added: "0.1.0"
description:
  - Reads the requirements that SGLang's C(pyproject.toml) declares at a source tree (O(project_dir)),
    plus O(extras) and O(requirements), and checks them against the distributions installed in the
    environment of O(python).
  - The torch family (O(torch_packages)) comes first and apart. A member that is installed is B(held)
    at its installed version - pinned by a constraints file and requested at exactly that version in
    every resolution, so pip cannot replace it or the CUDA libraries it pins - unless
    O(torch_install=replace). A declared member that is missing is installed from O(torch_index_url)
    (the wheels for the host's CUDA). When SGLang's pin disagrees with a held member, the module warns
    and resolves everything else with the held one.
  - The other requirements that are missing or out of range (drift) are then resolved by one
    C(pip install) with the family held, per O(on_drift). A satisfied environment runs no pip at all.
  - SGLang itself is not installed here (the sglang_build role installs it C(--no-deps)).
author:
  - gpufleet maintainers (@gpufleet)
options:
  python:
    description: Interpreter of the target environment (a venv's C(bin/python)).
    type: path
    required: true
  project_dir:
    description: Folder holding SGLang's C(pyproject.toml) (C(<checkout>/python)); its static C([project].dependencies) are read.
    type: path
    required: true
  extras:
    description: Optional-dependency groups of that C(pyproject.toml) to add.
    type: list
    elements: str
    default: []
  requirements:
    description: Further requirement strings the environment must satisfy (resolved with the declared ones).
    type: list
    elements: str
    default: []
  on_drift:
    description:
      - V(install) resolves what is missing or out of range with pip (family held).
      - V(fail) fails, naming every requirement that drifted, before anything is installed.
      - V(warn) reports the drift as a warning and installs nothing.
    type: str
    choices: [install, fail, warn]
    default: install
  torch_install:
    description:
      - V(if-missing) installs a declared family member only when it is absent; installed ones are held.
      - V(never) never installs one; a missing declared member fails the module.
      - V(replace) installs the wanted version (O(torch_version) for torch, else SGLang's pin) wherever the
        installed one does not satisfy it, replacing it, and re-resolves torchvision/torchaudio with a new torch.
    type: str
    choices: [if-missing, never, replace]
    default: if-missing
  torch_packages:
    description: The torch family, installed from O(torch_index_url) and held once installed.
    type: list
    elements: str
    default: [torch, torchvision, torchaudio]
  torch_version:
    description:
      - The torch to install instead of SGLang's pin, as a version (V(2.9.1), V(2.9.1+cu130)) or a specifier (V(>=2.9,<2.10)).
      - A local version label picks one CUDA build (V(2.9.1+cu130) is not satisfied by V(2.9.1)).
    type: str
    default: ""
  torch_index_url:
    description:
      - Package index of the torch family (passed as C(--index-url) after O(pip_args), so it wins for that step),
        for example PyTorch's index of the CUDA 13.0 wheels. Empty uses the index of O(pip_args) / pip's configuration.
    type: str
    default: ""
  pip_args:
    description: Arguments for every C(pip install) (index URL, C(--find-links), C(--no-index), proxy, certificates).
    type: list
    elements: str
    default: []
  cuda_version:
    description: The host's CUDA toolkit version (for example V(13.0)); a held torch built for another CUDA major gives a warning.
    type: str
    default: ""
  hint_prefix:
    description: Prefix of the variable names used in messages (the sglang_build role passes V(sglang_build_)).
    type: str
    default: ""
  restart_marker:
    description:
      - Restart-pending marker (see M(gpufleet.llm_server.restart_marker)) appended to right before a real C(pip install)
        changes the environment, so a running server's restart is never lost when a later task fails. Omitted, none.
    type: path
    version_added: "0.1.0"
attributes:
  check_mode:
    support: full
    description:
      - Reports the drift, and with pip >= 22.2 resolves it with C(pip install --dry-run --report) (one resolution
        including the family members that would be installed), returning RV(would_install). Nothing is installed.
  diff_mode:
    support: none
    description: Package installs have no file diff; RV(installed) and RV(would_install) list the versions before and after.
  platform:
    support: full
    platforms: posix
    description: Runs pip of O(python); the module itself needs Python >= 3.11 (tomllib) and the standard library.
notes:
  - Only the requirements SGLang declares directly are checked; their own dependencies are pip's business when it resolves.
  - Requirements whose environment marker does not apply (for example C(platform_machine == 'aarch64')) are ignored.
seealso:
  - module: gpufleet.llm_server.python_source_patch
  - name: sglang_build role
    description: Uses this module after every build (roles/sglang_build/README.md).
    link: https://github.com/gpufleet/llm_server/blob/main/roles/sglang_build/README.md
"""

EXAMPLES = r"""
- name: SGLang's dependencies into a bare venv, torch for CUDA 13.0 from its own index
  gpufleet.llm_server.sglang_dependencies:
    python: /opt/sglang/venv/bin/python
    project_dir: /opt/sglang/builds/0123abcd/src/python
    torch_index_url: https://pytorch-wheels.example/whl/cu130
    requirements:
      - huggingface_hub

- name: Keep a hand-tuned torch, fail instead of installing anything
  gpufleet.llm_server.sglang_dependencies:
    python: /root/venvs/torch-cu130/bin/python
    project_dir: /root/sglang/python
    torch_install: never
    on_drift: fail
"""

RETURN = r"""
held:
  description: Torch family members installed in the environment after the run, by name (kept at these versions).
  returned: success
  type: dict
  sample: {"torch": "2.9.1+cu130", "torchvision": "0.24.1+cu130"}
torch:
  description: The environment's torch (version, the CUDA it was built for, location) and whether this run installed it.
  returned: success
  type: dict
  sample: {"version": "2.9.1+cu130", "cuda": "13.0", "location": "/opt/sglang/venv/lib/python3.12/site-packages", "installed_now": false}
disagreements:
  description: Requirements on held family members that the installed version does not satisfy (kept, warned about).
  returned: success
  type: list
  elements: dict
  sample: [{"requirement": "torch==2.9.1", "name": "torch", "installed": "2.8.0"}]
drift:
  description: Non-family requirements that were missing or out of range before the run (name, installed, why, origin).
  returned: success
  type: list
  elements: dict
  sample: [{"requirement": "numpy", "name": "numpy", "installed": null, "why": "not installed", "origin": "declared"}]
family_install:
  description: Torch family requirements that were (or, in check mode, would be) installed first.
  returned: success
  type: list
  elements: str
installed:
  description: Distributions whose version changed in this run, with the version before (null when new) and after.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "numpy", "before": null, "after": "2.3.5"}]
would_install:
  description: In check mode, what pip's dry run would install (name, version, installed version now).
  returned: check mode
  type: list
  elements: dict
declared:
  description: Every requirement string checked (declared, extras, O(requirements), the torch override).
  returned: success
  type: list
  elements: str
pip_commands:
  description: The pip command lines run (each a list).
  returned: success
  type: list
  elements: list
environment:
  description:
    - SHA-256 over every installed name==version after the run but sglang itself (changes whenever another
      distribution does; switching SGLang builds does not change it).
  returned: success
  type: str
project:
  description: Name of the project and the pyproject.toml read.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_dependencies import (
    DependencyError,
    run,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            project_dir=dict(type="path", required=True),
            extras=dict(type="list", elements="str", default=[]),
            requirements=dict(type="list", elements="str", default=[]),
            on_drift=dict(type="str", default="install", choices=["install", "fail", "warn"]),
            torch_install=dict(type="str", default="if-missing", choices=["if-missing", "never", "replace"]),
            torch_packages=dict(type="list", elements="str", default=["torch", "torchvision", "torchaudio"]),
            torch_version=dict(type="str", default=""),
            torch_index_url=dict(type="str", default=""),
            pip_args=dict(type="list", elements="str", default=[]),
            cuda_version=dict(type="str", default=""),
            hint_prefix=dict(type="str", default=""),
            restart_marker=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module, module.params)
    except DependencyError as exc:
        module.fail_json(msg=str(exc), changed=exc.changed)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
