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
    description: The file to write. Its directory must exist.
    type: path
    required: true
  content:
    description: The whole content of the file (UTF-8 text).
    type: str
    required: true
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
    description: Shows the content before and after.
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
"""

RETURN = r"""
dest:
  description: The file written.
  returned: always
  type: str
  sample: /etc/systemd/system/sglang-kimi-k2.5.service
content_changed:
  description: Whether the content differs (or would, in check mode) from what was on disk.
  returned: always
  type: bool
  sample: true
restart_marked:
  description: Whether a line was appended to O(restart_marker).
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.server_file import run_server_file


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            content=dict(type="str", required=True),
            owner=dict(type="str"),
            group=dict(type="str"),
            mode=dict(type="raw"),
            restart_marker=dict(type="path"),
            restart_source=dict(type="str", default="server_file"),
            restart_reason=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run_server_file(module, module.params))


if __name__ == "__main__":
    main()
