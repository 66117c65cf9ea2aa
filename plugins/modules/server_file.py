#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_file
short_description: Write a file a server reads and mark the server's restart pending in the same step
version_added: "0.1.0"
description:
  - Ensures that O(dest) holds exactly O(content), with the given owner, group and mode, like
    M(ansible.builtin.copy) with O(ansible.builtin.copy#module:content).
  - When the content changes, the module first appends a line to the restart-pending marker
    O(restart_marker), then writes the file (temporary file in the same directory, fsync, atomic
    rename). A change is therefore never on disk without its marker, whatever happens to the run
    afterwards; the marker is removed only by the server's next start (the unit's C(ExecStartPre)),
    which is the event that picks the change up.
  - Use it for every file whose change needs a server restart (the SGLang unit and its environment
    file); render the content with the P(ansible.builtin.template#lookup) lookup.
author:
  - gpufleet maintainers (@gpufleet)
options:
  dest:
    description:
      - The file to write. Its directory must exist.
      - Required unless O(files) is given (then not allowed).
    type: path
  content:
    description:
      - The whole content of the file (UTF-8 text).
      - Required with O(dest).
    type: str
  files:
    description:
      - Several files in one module run instead of O(dest) and O(content). Each is compared, marked and written
        as a single file would be (its own temporary file and atomic rename, its own diff); the task is changed
        when any file changed, and RV(files) has the result of each.
      - Every directory is checked before the first write; a missing one fails the call with nothing written.
    type: list
    elements: dict
    suboptions:
      dest:
        description: The file to write.
        type: path
        required: true
      content:
        description: Its whole content (UTF-8 text).
        type: str
        required: true
      owner:
        description: Owner of this file (default O(owner)).
        type: str
      group:
        description: Group of this file (default O(group)).
        type: str
      mode:
        description: Mode of this file (default O(mode)).
        type: raw
      restart_reason:
        description: Why a restart is pending when this file changes; defaults to C(<dest> changed).
        type: str
      restart:
        description: V(false) for a file whose change needs no restart (no marker line for it).
        type: bool
        default: true
  owner:
    description: Owner of the file.
    type: str
  group:
    description: Group of the file.
    type: str
  mode:
    description: Mode of the file, as in M(ansible.builtin.file).
    type: raw
  restart_marker:
    description:
      - The restart-pending marker file to append to when the content changes (created 0600 in a 0700
        directory). Empty or omitted, no marker is written.
    type: path
  restart_source:
    description: Who wrote the marker line (the role, for the operator reading the marker).
    type: str
    default: server_file
  restart_reason:
    description: Why a restart is pending; defaults to C(<dest> changed).
    type: str
attributes:
  check_mode:
    support: full
    description: Reports whether the file (content or attributes) would change; writes neither file nor marker.
  diff_mode:
    support: full
    description: Shows the content before and after (one diff per changed file with O(files)).
  platform:
    support: full
    platforms: posix
    description: Plain file writes; runs on the target's Python 3.11+ with the standard library only.
notes:
  - A change of owner, group or mode alone is reported as changed but marks no restart (the server
    reads the same content).
seealso:
  - module: gpufleet.llm_server.systemd_credential
  - module: gpufleet.llm_server.restart_marker
"""

EXAMPLES = r"""
- name: Write the SGLang unit; a change marks the restart pending
  gpufleet.llm_server.server_file:
    dest: /etc/systemd/system/sglang-kimi-k2.5.service
    content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
    owner: root
    group: root
    mode: "0644"
    restart_marker: /var/lib/gpufleet/sglang/restart-pending
    restart_source: sglang_service
    restart_reason: the unit sglang-kimi-k2.5.service changed

- name: Write the environment file and the unit in one module run; either change marks the restart pending
  gpufleet.llm_server.server_file:
    files:
      - dest: /etc/gpufleet/sglang/kimi-k2.5.env
        content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
        mode: "0600"
        restart_reason: the environment file changed
      - dest: /etc/systemd/system/sglang-kimi-k2.5.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        mode: "0644"
        restart_reason: the unit sglang-kimi-k2.5.service changed
    owner: root
    group: root
    restart_marker: /var/lib/gpufleet/sglang/restart-pending
    restart_source: sglang_service
  register: server_files
"""

RETURN = r"""
dest:
  description: The file written.
  returned: with O(dest)
  type: str
  sample: /etc/systemd/system/sglang-kimi-k2.5.service
content_changed:
  description: Whether the content differs (or would, in check mode) from what was on disk (any file's, with O(files)).
  returned: always
  type: bool
  sample: true
restart_marked:
  description: Whether a line was appended to O(restart_marker).
  returned: always
  type: bool
  sample: true
files:
  description: With O(files), one result per file, in the order given.
  returned: with O(files)
  type: list
  elements: dict
  contains:
    dest:
      description: The file.
      type: str
    changed:
      description: Whether its content or attributes changed (or would).
      type: bool
    content_changed:
      description: Whether its content differs.
      type: bool
    restart_marked:
      description: Whether its change appended a line to O(restart_marker).
      type: bool
  sample: [{dest: /etc/systemd/system/sglang-kimi-k2.5.service, changed: false, content_changed: false, restart_marked: false}]
resources:
  description: With O(files), the files this call manages (read by the project's benchmark).
  returned: with O(files)
  type: list
  elements: str
  sample: [/etc/gpufleet/sglang/kimi-k2.5.env, /etc/systemd/system/sglang-kimi-k2.5.service]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.server_file import run_server_file, run_server_files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path"),
            content=dict(type="str"),
            files=dict(type="list", elements="dict", options=dict(
                dest=dict(type="path", required=True),
                content=dict(type="str", required=True),
                owner=dict(type="str"),
                group=dict(type="str"),
                mode=dict(type="raw"),
                restart_reason=dict(type="str"),
                restart=dict(type="bool", default=True),
            )),
            owner=dict(type="str"),
            group=dict(type="str"),
            mode=dict(type="raw"),
            restart_marker=dict(type="path"),
            restart_source=dict(type="str", default="server_file"),
            restart_reason=dict(type="str"),
        ),
        mutually_exclusive=[("dest", "files"), ("content", "files")],
        required_one_of=[("dest", "files")],
        required_together=[("dest", "content")],
        supports_check_mode=True,
    )
    if module.params["files"]:
        module.exit_json(**run_server_files(module, module.params))
    module.exit_json(**run_server_file(module, module.params))


if __name__ == "__main__":
    main()
