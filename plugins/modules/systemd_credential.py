#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: systemd_credential
short_description: Store a secret as a systemd credential (encrypted where the host can) for LoadCredential=
version_added: "0.1.0"
description:
  - Stores O(value) as the systemd credential O(name) in O(directory), for a unit to read with
    C(LoadCredentialEncrypted=NAME:PATH) or C(LoadCredential=NAME:PATH) (RV(directive), RV(path)). The
    service then finds it in C($CREDENTIALS_DIRECTORY/NAME), readable only by the service's user, and
    the secret never appears in any process's command line or environment.
  - Encrypted (C(systemd-creds encrypt), host key and TPM2 where present, file C(NAME.cred)) when the host
    has systemd 250+ and C(systemd-creds) and O(encrypt) allows it; otherwise a plain root-only file
    (0600 in a 0700 directory, systemd 247+). A credential stored in the other format is removed.
  - Idempotent without comparing ciphertexts, which differ on every encryption. The stored credential
    is decrypted and compared with O(value); only a different value (or owner/mode) rewrites it.
  - The secret reaches C(systemd-creds) on its standard input, never on a command line.
  - When the credential changes (or is removed) the module first appends a line to the restart-pending
    marker O(restart_marker), in the same step (see M(gpufleet.llm_server.server_file)).
author:
  - gpufleet maintainers (@gpufleet)
options:
  name:
    description:
      - Credential name (letters, digits, C(.), C(_), C(-)); the file name under C($CREDENTIALS_DIRECTORY).
      - Required unless O(credentials) is given (then not allowed).
    type: str
  value:
    description: The secret. Required with O(state=present).
    type: str
  credentials:
    description:
      - Several credentials in O(directory) in one module run instead of O(name), O(value) and O(state). Each is
        compared and stored as a single one would be; the task is changed when any changed, and RV(credentials)
        has each one's result by name.
      - Every name and value is checked before the first write.
    type: list
    elements: dict
    suboptions:
      name:
        description: Credential name, as O(name).
        type: str
        required: true
      value:
        description: The secret. Required with O(credentials[].state=present).
        type: str
      state:
        description: V(present) or V(absent), as O(state).
        type: str
        choices: [present, absent]
        default: present
      restart_reason:
        description: Why a restart is pending when this credential changes.
        type: str
  directory:
    description: Where the credential file lives on the host (created 0700).
    type: path
    required: true
  state:
    description: V(present) stores O(value); V(absent) removes the credential in both formats.
    type: str
    choices: [present, absent]
    default: present
  encrypt:
    description:
      - V(auto) encrypts where the host supports it, else stores a plain root-only file; V(always) fails on a
        host that cannot encrypt; V(never) always stores the plain file.
    type: str
    choices: [auto, always, never]
    default: auto
  restart_marker:
    description: Restart-pending marker to append to when the credential changes. Empty or omitted, none is written.
    type: path
  restart_source:
    description: Who wrote the marker line.
    type: str
    default: systemd_credential
  restart_reason:
    description: Why a restart is pending; defaults to C(credential NAME changed).
    type: str
attributes:
  check_mode:
    support: full
    description: Decrypts and compares (read-only) and reports whether the credential would change.
  diff_mode:
    support: none
    description: The value is a secret; no diff is ever shown.
  platform:
    support: full
    platforms: posix
    description: Needs systemd 247+ (250+ and C(systemd-creds) for encryption) and root.
notes:
  - Encrypted credentials are bound to the host key in C(/var/lib/systemd/credential.secret) (and the TPM2
    where one is used). Restoring the file on another host, or after that key was regenerated, fails at
    the service's start; run the play again to re-encrypt.
  - systemd publishes credentials by mounting a ramfs under C(/run/credentials). In a container whose root
    mount is not shared (Docker, some LXC setups) the mount is not visible to the service, which then
    finds an empty, root-only directory; run C(mount --make-rshared /) in the container at boot.
seealso:
  - module: gpufleet.llm_server.server_file
  - name: systemd.exec(5), Credentials
    description: LoadCredential=, LoadCredentialEncrypted=, $CREDENTIALS_DIRECTORY.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#Credentials
"""

EXAMPLES = r"""
- name: Store the SGLang API key as a credential
  gpufleet.llm_server.systemd_credential:
    name: api-key
    value: "{{ llm_server_api_key }}"
    directory: /etc/gpufleet/sglang/credentials
    restart_marker: /var/lib/gpufleet/sglang/restart-pending
    restart_source: sglang_service
  register: api_key_credential
  no_log: true

- name: Store the API key and the secret environment in one module run (the HF token is not set here)
  gpufleet.llm_server.systemd_credential:
    credentials:
      - name: api-key
        value: "{{ llm_server_api_key }}"
      - name: environment
        state: absent
    directory: /etc/gpufleet/sglang/credentials
    restart_marker: /var/lib/gpufleet/sglang/restart-pending
  register: sglang_credentials
  no_log: true

- name: Use it in the unit template
  ansible.builtin.debug:
    msg: "{{ api_key_credential.directive }}=api-key:{{ api_key_credential.path }}"
"""

RETURN = r"""
path:
  description: The credential file (C(NAME.cred) when encrypted); C(null) with O(state=absent).
  returned: always
  type: str
  sample: /etc/gpufleet/sglang/credentials/api-key.cred
format:
  description: V(encrypted) or V(plain); C(null) with O(state=absent).
  returned: always
  type: str
  sample: encrypted
directive:
  description: The unit setting that loads it, V(LoadCredentialEncrypted) or V(LoadCredential).
  returned: always
  type: str
  sample: LoadCredentialEncrypted
systemd_version:
  description: The host's systemd major version.
  returned: with O(state=present)
  type: int
  sample: 252
restart_marked:
  description: Whether a line was appended to O(restart_marker).
  returned: always
  type: bool
  sample: false
credentials:
  description: With O(credentials), each credential's result (RV(path), RV(format), RV(directive), changed, restart_marked) by name.
  returned: with O(credentials)
  type: dict
  sample: {api-key: {name: api-key, path: /etc/gpufleet/sglang/credentials/api-key.cred, format: encrypted,
                     directive: LoadCredentialEncrypted, changed: false, restart_marked: false}}
resources:
  description:
    - With O(credentials), one file per credential (the one in use; for an absent one, where its plain file would be),
      read by the project's benchmark.
  returned: with O(credentials)
  type: list
  elements: str
  sample: [/etc/gpufleet/sglang/credentials/api-key.cred, /etc/gpufleet/sglang/credentials/environment]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.systemd_credential import (
    run_systemd_credential, run_systemd_credentials)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str"),
            value=dict(type="str", no_log=True),
            credentials=dict(type="list", elements="dict", no_log=False, options=dict(
                name=dict(type="str", required=True),
                value=dict(type="str", no_log=True),
                state=dict(type="str", choices=["present", "absent"], default="present"),
                restart_reason=dict(type="str"),
            )),
            directory=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            encrypt=dict(type="str", choices=["auto", "always", "never"], default="auto"),
            restart_marker=dict(type="path"),
            restart_source=dict(type="str", default="systemd_credential"),
            restart_reason=dict(type="str"),
        ),
        mutually_exclusive=[("name", "credentials"), ("value", "credentials")],
        required_one_of=[("name", "credentials")],
        supports_check_mode=True,
    )
    if module.params["credentials"]:
        module.exit_json(**run_systemd_credentials(module, module.params))
    module.exit_json(**run_systemd_credential(module, module.params))


if __name__ == "__main__":
    main()
