#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: role_inputs
short_description: Check the variables of this collection's roles once, before any host is changed
version_added: "0.1.0"
description:
  - For each role in O(roles), loads C(roles/<role>/meta/argument_specs.yml) (entry O(entry_point)) and the role's
    C(defaults/main.yml) and C(vars/main.yml) from this collection, templates the options from the task's variables
    (the role's defaults below everything else, as Ansible layers them), and validates them with ansible-core's
    C(ArgumentSpecValidator), so the messages are those of the automatic C(Validating arguments against arg spec)
    task.
  - When a role's spec passes, the role's own rules on its variables run - the checks that need no host (formats of
    versions, branches, names and paths; the former variables of an old layout). Each message names the variable, the
    value and the fix.
  - Every problem of every role is reported in one failure, before anything changes. On success the fact
    C(gpufleet_llm_server_checked_roles) lists the roles checked (O(record)); each role's first task runs this action
    for itself only when the role is not listed there, so in C(site.yml) the checks run once per host (in the preflight role),
    while a role run alone (C(roles), C(include_role)) still refuses bad input in the same words.
  - A value changed after the check in the same run (C(set_fact), a later play's C(vars)) is not checked again.
  - This is an action plugin; it needs no connection to the host.
author:
  - gpufleet maintainers (@gpufleet)
options:
  roles:
    description:
      - Roles of this collection to check, by short name (V(sglang_build)) or FQCN (V(gpufleet.llm_server.sglang_build)).
    type: list
    elements: str
    required: true
  entry_point:
    description:
      - Entry point of the argument specs to validate against. The rules of each role belong to V(main).
    type: str
    default: main
  skip_options:
    description:
      - Options left out, for example booleans a later play sets for itself (C(site.yml) sets
        C(sglang_service_defer_restart) and C(nvidia_driver_defer_reboot) in its install play, which the preflight play
        does not see).
    type: list
    elements: str
    default: []
  defer_undefined:
    description:
      - When a role's option cannot be templated only because a variable it follows is not defined yet (set by an
        earlier role later in the run), leave that role to check itself when it starts (it is not added to
        C(gpufleet_llm_server_checked_roles) and is listed in RV(deferred)) instead of failing.
    type: bool
    default: false
  also_found:
    description:
      - Problem lines found earlier that wait for a later check (the preflight role's controller-pass problems,
        which its read-only host pass reports); when this check fails, its message lists them too, so that one
        refusal names every problem found so far.
    type: list
    elements: str
    default: []
  record:
    description:
      - Add the roles checked to the fact C(gpufleet_llm_server_checked_roles), so that their own checks are skipped
        later in the run (preflight). A role checking itself sets V(false), so that each include of it is checked anew.
    type: bool
    default: true
attributes:
  action:
    support: full
    description: Runs on the controller only.
  async:
    support: none
    description: Returns at once.
  check_mode:
    support: full
    description: Reads only the collection's files and the task's variables; the same result in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
  platform:
    support: full
    platforms: posix
    description: Needs no connection to the target.
notes:
  - The argument specs of entry points other than V(main) list a subset of V(main)'s options with the same types, so a
    role checked at V(main) needs no other validation in the same run (a unit test keeps it so).
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the variables of the install play's roles (preflight)
  gpufleet.llm_server.role_inputs:
    roles:
      - nvidia_driver
      - sglang_build
    skip_options:
      - nvidia_driver_defer_reboot
    defer_undefined: true

- name: A role checks itself when preflight did not
  gpufleet.llm_server.role_inputs:
    roles:
      - sglang_build
    record: false
  when: "'sglang_build' not in (gpufleet_llm_server_checked_roles | default([]))"
"""

RETURN = r"""
checked:
  description: Roles whose variables are valid.
  returned: always
  type: list
  elements: str
  sample: [nvidia_driver, sglang_build]
deferred:
  description: Roles left to check themselves (O(defer_undefined)), each with the options that could not be templated yet.
  returned: always
  type: dict
  sample: {}
problems:
  description: Messages per role; empty on success.
  returned: always
  type: dict
  sample: {sglang_build: ["sglang_build_keep_builds=0 must be at least 1 ..."]}
ansible_facts:
  description: Facts set on success (with O(record)).
  returned: success
  type: complex
  contains:
    gpufleet_llm_server_checked_roles:
      description: Every role checked so far in this run (earlier checks kept).
      type: list
      elements: str
"""
