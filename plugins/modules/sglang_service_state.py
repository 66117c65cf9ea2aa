#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_service_state
short_description: Read in one call what the sglang_service role checks before it writes, snapshots or restarts
version_added: "0.2.0"
description:
  - Read-only. The state reads of the C(gpufleet.llm_server.sglang_service) role (issue 20), one call where a
    no-op run needs one, so that the writers run only when something differs.
  - V(host) reads the server's account (passwd and group entries, the groups the user is in), which of
    O(directories) are not root-owned directories of their mode, the previous deployment record O(record), and,
    when O(access) is given and the user exists, which of those paths the user cannot use. That check runs in a
    forked child that takes the user's groups, gid and uid and asks C(access(2)); it needs root.
  - V(known_good) compares the last-known-good snapshot O(known_good_dir) with its sources (the unit, the
    environment file, the deployment records, the credentials of O(credential_dir)) by bytes, owner, group and mode,
    and reads where O(build_link) points and the snapshot's C(known-good.json). Credential contents are compared,
    never returned.
  - V(apply) reads whether the unit file exists, the restart-pending marker's entries, the units of other profiles
    (plain files C(sglang-*.service) next to the unit that this role wrote) and the unit's state from
    C(systemctl show).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.attributes.read_only
options:
  read:
    description: Which read to make.
    type: str
    choices: [host, known_good, apply]
    required: true
  user:
    description: The server's user (C(sglang_service_user)). Required with O(read=host).
    type: str
  group:
    description: The server's group (C(sglang_service_group)); empty to read no group entry.
    type: str
    default: ""
  directories:
    description: Directories that must be root-owned with the given mode (V(host)).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      mode:
        description: Octal mode, for example V('0700').
        type: str
        required: true
  record:
    description: The previous deployment record (JSON) to return (V(host)); empty for none.
    type: str
    default: ""
  access:
    description:
      - Paths the server's user must be able to use (V(host)); leave it out to check nothing (the server runs as root).
      - Paths that do not exist are not judged (check mode, a model still to be placed by hand).
    type: list
    elements: dict
    suboptions:
      kind:
        description: V(x) executable, V(r) readable, V(d) readable and searchable directory.
        type: str
        choices: [x, r, d]
        required: true
      path:
        description: Absolute path.
        type: path
        required: true
  known_good_dir:
    description: The snapshot directory (C(sglang_service_known_good_dir)). Required with O(read=known_good).
    type: path
  credential_dir:
    description: The directory of the unit's credentials (C(sglang_service_credential_dir)). Required with O(read=known_good).
    type: path
  build_link:
    description: The link to the served SGLang build (C(sglang_service_build_link)); empty for none.
    type: str
    default: ""
  unit:
    description: The unit file's path. Required with O(read=known_good) and O(read=apply).
    type: path
  unit_snapshot:
    description: The unit's file name in the snapshot. Required with O(read=known_good).
    type: str
  env_file:
    description: The environment file (C(sglang_service_env_file)). Required with O(read=known_good).
    type: path
  env_snapshot:
    description: The environment file's name in the snapshot. Required with O(read=known_good).
    type: str
  records:
    description: The deployment record's files (JSON, Markdown), snapshotted under their own names when they exist.
    type: list
    elements: path
    default: []
  restart_marker:
    description: The restart-pending marker (C(sglang_service_restart_marker)); empty for none.
    type: str
    default: ""
  unit_name:
    description: The unit's name (C(sglang_service_unit_name)). Required with O(read=apply).
    type: str
notes:
  - The access check of O(read=host) needs root (the module fails and says so otherwise).
seealso:
  - module: gpufleet.llm_server.server_file
  - module: gpufleet.llm_server.restart_marker
"""

EXAMPLES = r"""
- name: Read the server's account, directories, access and previous record
  gpufleet.llm_server.sglang_service_state:
    read: host
    user: sglang
    group: sglang
    directories:
      - {path: /etc/sglang, mode: "0700"}
      - {path: /usr/local/lib/gpufleet, mode: "0755"}
    record: /var/lib/gpufleet/deployment-kimi-k2.5.json
    access:
      - {kind: x, path: /opt/sglang/venv/bin/python}
      - {kind: d, path: /shared/kimi-k2.5-int4}
  register: host

- name: Compare the known-good snapshot with its sources
  gpufleet.llm_server.sglang_service_state:
    read: known_good
    known_good_dir: /var/lib/gpufleet/known-good
    credential_dir: /etc/sglang/credentials
    build_link: /opt/sglang/current
    unit: /etc/systemd/system/sglang-kimi-k2.5.service
    unit_snapshot: sglang-kimi-k2.5.service
    env_file: /etc/sglang/kimi-k2.5.env
    env_snapshot: kimi-k2.5.env
    records:
      - /var/lib/gpufleet/deployment-kimi-k2.5.json
      - /var/lib/gpufleet/deployment-kimi-k2.5.md
  register: snapshot

- name: Read the unit, the restart marker, other profiles' units and the unit's state
  gpufleet.llm_server.sglang_service_state:
    read: apply
    unit: /etc/systemd/system/sglang-kimi-k2.5.service
    unit_name: sglang-kimi-k2.5.service
    restart_marker: /var/lib/gpufleet/sglang-restart-pending
  register: unit
"""

RETURN = r"""
passwd:
  description: The user's passwd entry (null when there is no such user).
  returned: read is host
  type: dict
  sample: {name: sglang, uid: 998, gid: 998, gecos: "", home: /var/lib/sglang, shell: /usr/sbin/nologin}
group:
  description: The group entry of O(group) (null when there is none or O(group) is empty).
  returned: read is host
  type: dict
  sample: {name: sglang, gid: 998, members: []}
groups:
  description: The names of the groups the user is in, its primary group first (as C(id -nG) lists them).
  returned: read is host
  type: list
  elements: str
directories_differ:
  description: The paths of O(directories) that are not root-owned directories (not links) of their mode.
  returned: read is host
  type: list
  elements: str
previous_record:
  description: The parsed O(record) (empty when it does not exist or holds no JSON object).
  returned: read is host
  type: dict
access_checked:
  description: Whether the access check ran (O(access) given and the user exists).
  returned: read is host
  type: bool
access_problems:
  description: One C(PATH (not readable)), C(PATH (not executable)) or C(PATH (not readable and searchable)) per path the user cannot use.
  returned: read is host
  type: list
  elements: str
differs:
  description: Snapshot files or directories absent, or not as their source, or not root-owned 0600 (directories 0700).
  returned: read is known_good
  type: list
  elements: str
missing:
  description: The unit file or the environment file, where absent.
  returned: read is known_good
  type: list
  elements: str
records:
  description: The files of O(records) that exist, in that order.
  returned: read is known_good
  type: list
  elements: str
credentials:
  description: The names of the credential files in O(credential_dir), sorted.
  returned: read is known_good
  type: list
  elements: str
stale:
  description: Snapshot files no longer wanted (credentials the unit no longer loads, other profiles' files).
  returned: read is known_good
  type: list
  elements: str
build:
  description: Where O(build_link) resolves to (empty without a link).
  returned: read is known_good
  type: str
known_good:
  description: The snapshot's C(known-good.json) (content, mode, owner, group), null when absent.
  returned: read is known_good
  type: dict
  sample: {content: "{\n    \"profile\": \"kimi-k2.5\"\n}\n", mode: "0600", owner: root, group: root}
unit_present:
  description: Whether the unit file exists.
  returned: read is apply
  type: bool
restart_reasons:
  description: The restart-pending marker's entries (empty without a marker).
  returned: read is apply
  type: list
  elements: dict
  sample: [{at: "2026-12-01T10:00:00.000000Z", source: sglang_service, reason: the unit sglang-a.service changed}]
other_units:
  description: The names of other profiles' units this role wrote next to the unit.
  returned: read is apply
  type: list
  elements: str
status:
  description: The unit's C(LoadState), C(ActiveState), C(UnitFileState) and C(NeedDaemonReload) (empty without systemctl).
  returned: read is apply
  type: dict
  sample: {LoadState: loaded, ActiveState: active, UnitFileState: enabled, NeedDaemonReload: "no"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_service_state as state


def main():
    module = AnsibleModule(
        argument_spec=dict(
            read=dict(type="str", choices=["host", "known_good", "apply"], required=True),
            user=dict(type="str"),
            group=dict(type="str", default=""),
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                mode=dict(type="str", required=True),
            )),
            record=dict(type="str", default=""),
            access=dict(type="list", elements="dict", options=dict(
                kind=dict(type="str", choices=["x", "r", "d"], required=True),
                path=dict(type="path", required=True),
            )),
            known_good_dir=dict(type="path"),
            credential_dir=dict(type="path"),
            build_link=dict(type="str", default=""),
            unit=dict(type="path"),
            unit_snapshot=dict(type="str"),
            env_file=dict(type="path"),
            env_snapshot=dict(type="str"),
            records=dict(type="list", elements="path", default=[]),
            restart_marker=dict(type="str", default=""),
            unit_name=dict(type="str"),
        ),
        required_if=[
            ("read", "host", ("user",)),
            ("read", "known_good", ("known_good_dir", "credential_dir", "unit", "unit_snapshot", "env_file",
                                    "env_snapshot")),
            ("read", "apply", ("unit", "unit_name")),
        ],
        supports_check_mode=True,
    )
    p = module.params
    for item in p["directories"]:
        try:
            int(item["mode"], 8)
        except ValueError:
            module.fail_json(msg="directories: mode=%r of %s is not an octal mode. Fix: write it as a quoted octal "
                                 "string such as '0700'." % (item["mode"], item["path"]))
    if p["read"] == "host":
        try:
            result = state.read_host(p["user"], p["group"], p["directories"], p["record"], p["access"])
        except state.ReadError as exc:
            module.fail_json(msg=str(exc), changed=False)
    elif p["read"] == "known_good":
        result = state.read_known_good(p["known_good_dir"], p["credential_dir"], p["build_link"], p["unit"],
                                       p["unit_snapshot"], p["env_file"], p["env_snapshot"], p["records"])
    else:
        result = state.read_apply(p["unit"], p["restart_marker"], p["unit_name"], module.run_command,
                                  module.get_bin_path("systemctl"))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
