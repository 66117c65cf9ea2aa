#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_build_state
short_description: Read in one call what the sglang_build role checks on every run, and decide what must change
version_added: "0.2.0"
description:
  - Read-only. The state read of the C(gpufleet.llm_server.sglang_build) role (issue 20), that is which OS
    packages are missing (dpkg's status database), whether the target interpreter exists, the commit
    O(ref) names, whether that commit has a complete build (C(build.json)) and what its last verification
    saw, the state file and its directory, the environment's site-packages and the C(.pth) file there, and
    where the C(current) link points. It returns the role's decisions in RV(needs) and the
    refusals in RV(refusals), so that the writers run only when something differs.
  - For a commit that must be built it reads, with C(git show) (from the clone, or from a one-commit shallow
    fetch into a temporary repository removed at once when there is no clone yet), C(python/pyproject.toml),
    C(python/setup.py) and the C(rust/) workspace manifests, and returns RV(upstream) - the Rust extensions the tree
    declares, those O(rust_extensions) selects and those the build goes without, the toolchain check, the torch
    pins against the held torch - with the refusals of what cannot be built.
  - The ref is resolved like M(ansible.builtin.git) in check mode with C(bare=true) resolves it, in one
    C(git ls-remote) against the clone's C(origin) (or O(git_url) when there is no clone yet), a branch
    first, then a tag (an annotated tag resolves to its commit). A full 40-digit commit id needs no remote;
    a shorter hash is looked up in the local clone first. A ref that names no branch or tag and does not look
    like a commit hash is refused with the role's message.
  - With O(scope=served) it only reads the build C(current) points at and its C(build.json) (the facts
    a run limited by tags, e.g. C(--tags sm120-patch), still reports).
author:
  - gpufleet maintainers (@gpufleet)
options:
  scope:
    description: V(full) reads everything; V(served) only the C(current) link and its build's record.
    type: str
    choices: [full, served]
    default: full
  dir:
    description: The role's O(dir) (C(sglang_build_dir)); C(repo.git), C(builds/) and C(current) live there.
    type: path
    required: true
  python:
    description: The target interpreter (C(sglang_build_python)). Required with O(scope=full).
    type: path
  venv_create:
    description: Whether the role creates the venv of O(python) when it is missing (else a missing one is refused).
    type: bool
    default: true
  git_url:
    description: The repository (C(sglang_build_git_url)). Required with O(scope=full).
    type: str
  ref:
    description: The branch, tag or commit to build (C(sglang_build_ref)). Required with O(scope=full).
    type: str
  state_file:
    description: The role's state file (C(sglang_build_state_file)). Required with O(scope=full).
    type: path
  os_packages:
    description: The OS packages the build needs; empty when the role does not install them.
    type: list
    elements: str
    default: []
  dpkg_status:
    description: dpkg's status database; without it no package is reported missing (not a Debian-family host).
    type: path
    default: /var/lib/dpkg/status
  verify_modules:
    description: The modules the verification imports (C(sglang_build_verify_modules)).
    type: list
    elements: str
    default: []
  pth_content:
    description: The content the role writes to C(gpufleet-sglang.pth) in the environment's site-packages.
    type: str
    default: ""
  host:
    description: The inventory name of the host, for the interpreter's refusal.
    type: str
    default: this host
  rust_extensions:
    description:
      - The Rust extensions to build (C(sglang_build_rust_extensions)) - V(all), V(none), or a list of
        case-insensitive substrings of their names, as upstream's C(SGLANG_BUILD_RUST_EXTS) reads them.
      - Checked only for a commit that must be built and whose C(python/setup.py) builds the C(rust/) workspace.
    type: raw
    default: none
  rust_toolchain_dir:
    description:
      - Root-owned directory of the Rust toolchain (C(bin/cargo), C(bin/rustc)) used when extensions are built;
        its tools must be at least the C(rust/rust-toolchain.toml) channel of the commit.
    type: path
    default: /opt/gpufleet/rust
  extras:
    description: Optional-dependency groups whose torch pins count too (C(sglang_build_extras)).
    type: list
    elements: str
    default: []
  torch_packages:
    description: The torch family (C(sglang_build_torch_packages)).
    type: list
    elements: str
    default: [torch, torchvision, torchaudio]
  torch_install:
    description: C(sglang_build_torch_install); with V(replace) a contradicting pin is not refused (the role installs it).
    type: str
    choices: [if-missing, never, replace]
    default: if-missing
  torch_pin_mismatch:
    description:
      - V(refuse) refuses a commit whose declared torch family contradicts the installed one that the role would keep;
        V(hold) keeps it (the dependency step warns).
    type: str
    choices: [refuse, hold]
    default: refuse
attributes:
  check_mode:
    support: full
    description: >-
      Reads only (C(git ls-remote), C(git show), the interpreter's C(sysconfig), C(cargo --version)); runs the same
      in check mode. A shallow fetch into a temporary directory is removed before it returns.
  diff_mode:
    support: none
    description: Changes nothing; the role's writers show their diffs when they run.
notes:
  - The decisions are those of the role's tasks before this module, with the same refusal messages; whether the
    dependency step changed the environment is only known after it, so the role adds that to the V(verify) decision of RV(needs).
seealso:
  - module: ansible.builtin.git
  - module: gpufleet.llm_server.package_state
"""

EXAMPLES = r"""
- name: Read the build's state (one call)
  gpufleet.llm_server.sglang_build_state:
    dir: /opt/sglang
    python: /opt/sglang/venv/bin/python
    git_url: https://github.com/sgl-project/sglang.git
    ref: v0.5.10.post1
    state_file: /var/lib/gpufleet/sglang_build.json
    os_packages: [git, python3-venv]
    verify_modules: [sglang.launch_server]
    pth_content: "{{ lookup('ansible.builtin.template', 'gpufleet-sglang.pth.j2') }}"
  register: build_state

- name: Refuse what cannot be built, before any change
  ansible.builtin.fail:
    msg: "{{ build_state.refusals | join(' ') }}"
  when: build_state.refusals | length > 0

- name: The tree the current link points at (a run limited by tags)
  gpufleet.llm_server.sglang_build_state:
    scope: served
    dir: /opt/sglang
  register: served
"""

RETURN = r"""
commit:
  description: The commit O(ref) names (the full id, or a short hash not in the local clone yet); null while git is missing.
  returned: scope is full
  type: str
  sample: 0b9f2c1d7e5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c
tree:
  description: The build's tree, C(<dir>/builds/<commit>).
  returned: scope is full
  type: str
needs:
  description:
    - "What must change: V(os_packages), V(venv), V(resolve) (git is about to be installed, read again after it),
      V(build) (no complete build of the commit), V(verify) (new build, other interpreter or modules; the role
      adds the dependency step's change), V(state_file), V(state_dir), V(pth), V(switch) (C(current) points elsewhere)."
  returned: scope is full
  type: dict
  sample: {os_packages: false, venv: false, resolve: false, build: false, verify: false, state_file: false,
           state_dir: false, pth: false, switch: false}
reasons:
  description: Why each of the V(verify), V(state_file), V(state_dir) and V(pth) decisions of RV(needs) is true.
  returned: scope is full
  type: dict
refusals:
  description: The messages of the role's refusals that apply (empty when none); the role fails with them before any change.
  returned: scope is full
  type: list
  elements: str
missing_packages:
  description: The requests of O(os_packages) dpkg does not have installed.
  returned: scope is full
  type: list
  elements: str
python_exists:
  description: Whether O(python) exists.
  returned: scope is full
  type: bool
previous:
  description: The commit's C(build.json) when its build is complete, else an empty dict.
  returned: scope is full
  type: dict
verified_environment:
  description: The environment fingerprint the last verification recorded ('' when none).
  returned: scope is full
  type: str
state:
  description: The parsed state file (empty when absent).
  returned: scope is full
  type: dict
purelib:
  description: The environment's site-packages (null while O(python) does not exist).
  returned: scope is full
  type: str
current_target:
  description: Where the C(current) link resolves to (null when there is no link).
  returned: scope is full
  type: str
layout:
  description: The paths under O(dir) (root, repo, builds, current).
  returned: scope is full
  type: dict
served:
  description: The tree C(current) resolves to (null without a link) and its C(build.json) record.
  returned: scope is served
  type: dict
  sample: {tree: /opt/sglang/builds/0b9f2c1d7e5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c, record: {commit: 0b9f2c1d7e5a, version: 0.5.10.post1}}
upstream:
  description:
    - What the new commit's build files say (empty when the commit has a complete build); V(rust) is null for a
      tree without main's Rust build (release 0.5.10.post1 and older).
  returned: scope is full
  type: dict
  sample: {source: clone, rust: {env: none, channel: "1.92", declared: [sglang.srt.rust_extensions._grpc],
           selected: [], without: [sglang.srt.rust_extensions._grpc], torch: false, toolchain: null},
           torch: {declared: [torch==2.9.1], held: {torch: 2.9.1}, contradicted: []}}
resources:
  description: The files and packages read that the role manages (one stat each is the benchmark's floor).
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_state as state


def main():
    module = AnsibleModule(
        argument_spec=dict(
            scope=dict(type="str", choices=["full", "served"], default="full"),
            dir=dict(type="path", required=True),
            python=dict(type="path"),
            venv_create=dict(type="bool", default=True),
            git_url=dict(type="str"),
            ref=dict(type="str"),
            state_file=dict(type="path"),
            os_packages=dict(type="list", elements="str", default=[]),
            dpkg_status=dict(type="path", default="/var/lib/dpkg/status"),
            verify_modules=dict(type="list", elements="str", default=[]),
            pth_content=dict(type="str", default=""),
            host=dict(type="str", default="this host"),
            rust_extensions=dict(type="raw", default="none"),
            rust_toolchain_dir=dict(type="path", default="/opt/gpufleet/rust"),
            extras=dict(type="list", elements="str", default=[]),
            torch_packages=dict(type="list", elements="str", default=["torch", "torchvision", "torchaudio"]),
            torch_install=dict(type="str", choices=["if-missing", "never", "replace"], default="if-missing"),
            torch_pin_mismatch=dict(type="str", choices=["refuse", "hold"], default="refuse"),
        ),
        required_if=[("scope", "full", ("python", "git_url", "ref", "state_file"))],
        supports_check_mode=True,
    )
    params = module.params
    if params["scope"] == "served":
        served = state.read_served(params["dir"])
        module.exit_json(changed=False, served={"tree": served["tree"], "record": served["record"]},
                         resources=served["resources"])
    # git answers in the C locale, as the git module asks it to
    module.run_command_environ_update = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C")

    def run(argv, env=None):
        return module.run_command(argv, environ_update=env)

    try:
        result = state.read_state(params, run, module.get_bin_path)
    except state.ReadError as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
