#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: controller_file
short_description: Write a report file on the controller, in the controller's process
version_added: "0.1.0"
description:
  - Writes O(content) to O(dest) on the Ansible controller (temporary file in the same directory, fsync, atomic
    rename), creating missing directories with O(directory_mode). A file that holds O(content) with O(mode)
    already is left alone.
  - For output meant for the operator (the smoke test's JSON reports), not for managed state; the task is never
    C(changed), and it writes in check mode too.
  - This is an action plugin; it needs no connection and runs no module, so it costs what a C(set_fact) costs, where
    M(ansible.builtin.copy) delegated to C(localhost) starts a module process per host.
author:
  - gpufleet maintainers (@gpufleet)
options:
  dest:
    description: The file on the controller. Relative paths are relative to the controller's working directory.
    type: path
    required: true
  content:
    description: The whole content of the file (UTF-8 text).
    type: str
    required: true
  mode:
    description: Mode of the file (quoted octal string such as V('0644'), or an int).
    type: raw
    default: "0644"
  directory_mode:
    description: Mode of the directories it creates.
    type: raw
    default: "0755"
attributes:
  action:
    support: full
    description: Runs on the controller only.
  async:
    support: none
    description: Runs in the controller's process.
  check_mode:
    support: full
    description: Writes in check mode too (a report of the run, not a change of any host) and reports no change.
  diff_mode:
    support: none
    description: A report is output; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: The controller.
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Save the JSON report on the controller
  gpufleet.llm_server.controller_file:
    dest: "{{ playbook_dir }}/artifacts/smoke-test/{{ inventory_hostname }}-deploy.json"
    content: "{{ report | to_nice_json }}\n"
"""

RETURN = r"""
dest:
  description: The file.
  returned: always
  type: str
  sample: /srv/ansible/artifacts/smoke-test/gpu-node-1-deploy.json
written:
  description: Whether the file was written (false when it held O(content) with O(mode) already).
  returned: always
  type: bool
  sample: true
"""
