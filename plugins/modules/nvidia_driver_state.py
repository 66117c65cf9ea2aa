#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_state
short_description: Read an NVIDIA driver host's state once and say what the nvidia_driver role has to change
version_added: "0.2.0"
description:
  - Read-only. In one call reads dpkg's status database, the managed files, the apt preference files, the
    apt index list, nvidia-persistenced's unit state, the Secure Boot EFI variable and the machine id, and
    returns what has to change (RV(needs)) so that the role runs its writers only when needed.
  - Decides whether the installed packages already are the requested driver (RV(keep)) from dpkg alone,
    without apt, when every condition of the fast keep holds (see
    C(plugins/module_utils/nvidia_driver_rules.py) C(fast_keep)); otherwise RV(keep.plan) is
    V(plan with apt) and the role plans with M(gpufleet.llm_server.apt_transaction) as before.
  - With O(keep_record), also compares the record the role stores after an apt run that agreed (the request, the
    index signature and the stack apt left); RV(fast_keep) is true only when the fast keep holds and the record
    vouches for it, and then the role runs no apt at all.
  - With O(mode=record) (after a real apt run), writes that record to O(keep_record) when the fast keep, read from
    dpkg now, reproduces exactly the stack apt reports in O(apt_packages) and O(apt_driver_version); otherwise
    removes it, so that apt plans on every run. This is the only mode that changes anything on the host.
  - With O(mode=verify), judges the loaded driver instead (the checks of the role's C(verify.yml)), running
    C(nvidia-smi) and, when O(installed_version) is not given, C(dpkg-query) for the package shipping it.
author:
  - gpufleet maintainers (@gpufleet)
options:
  mode:
    description: V(state) reads what the role manages; V(record) stores the keep record; V(verify) judges the loaded driver.
    type: str
    choices: [state, record, verify]
    default: state
  package_data:
    description: The role's merged package data, C(source -> distribution -> branch -> entry) (C(__nvidia_driver_data)).
    type: dict
    default: {}
  source:
    description: C(nvidia_driver_source).
    type: str
    default: nvidia
  distribution:
    description: C(nvidia_driver_distribution), for example V(ubuntu2404).
    type: str
    default: ""
  branch:
    description: C(nvidia_driver_branch).
    type: str
    required: true
  flavor:
    description: C(nvidia_driver_flavor).
    type: str
    choices: [open, proprietary]
    default: open
  profile:
    description: C(nvidia_driver_profile).
    type: str
    choices: [compute, full]
    default: compute
  kernel_modules:
    description: C(nvidia_driver_kernel_modules).
    type: str
    choices: [dkms, precompiled]
    default: dkms
  kernel_flavor:
    description: C(nvidia_driver_kernel_flavor); empty derives it from O(kernel_release) as the role does.
    type: str
    default: ""
  kernel_release:
    description: The running kernel (C(ansible_facts.kernel)).
    type: str
    default: ""
  distribution_version:
    description: C(ansible_facts.distribution_version) (the HWE kernel flavour's suffix).
    type: str
    default: ""
  version:
    description: C(nvidia_driver_version); empty for none.
    type: str
    default: ""
  upgrade:
    description: C(nvidia_driver_upgrade). True always plans with apt.
    type: bool
    default: false
  hold:
    description: C(nvidia_driver_hold).
    type: bool
    default: true
  version_from:
    description: Regular expression of the packages whose version is the driver version (C(__nvidia_driver_version_from)).
    type: str
    default: ^(lib)?nvidia-
  version_pin_prefix:
    description: Name prefix of the per-version pinning package.
    type: str
    default: nvidia-driver-pinning-
  preferences:
    description:
      - The apt preference files as this run leaves them, name to content (empty content means absent), as the
        role passes them to M(gpufleet.llm_server.apt_transaction).
    type: dict
    default: {}
  preferences_dir:
    description: Where the preference files live.
    type: path
    default: /etc/apt/preferences.d
  agreed_index_signature:
    description:
      - RV(index_signature) of the last run whose apt plan agreed with the fast keep. When given and the apt
        indexes changed since, RV(keep) says V(plan with apt) (the candidates' relations may differ from the
        installed ones', which dpkg cannot know).
    type: str
  keep_record:
    description:
      - The JSON file where the role keeps apt's last agreeing judgement (root-owned, mode 0644, no secrets). Read
        in O(mode=state), written or removed in O(mode=record). Omitted, RV(fast_keep) is always false.
    type: path
  apt_packages:
    description: With O(mode=record), the C(packages) apt_transaction returned after installing (name, version).
    type: list
    elements: dict
    default: []
  apt_driver_version:
    description: With O(mode=record), the C(driver_version) apt_transaction returned after installing.
    type: str
    default: ""
  files:
    description:
      - Managed files, compared as M(ansible.builtin.template) would, by bytes, mode and owner/group names.
        V(null) content means the file must be absent (M(ansible.builtin.file) V(state=absent)).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      content:
        description: The content the writer would leave (rendered on the controller), or null for absent.
        type: str
      mode:
        description: Octal mode such as V('0644').
        type: str
      owner:
        description: Owner name.
        type: str
      group:
        description: Group name.
        type: str
  directories:
    description: Managed directories, compared as M(ansible.builtin.file) V(state=directory) would.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      mode:
        description: Octal mode.
        type: str
      owner:
        description: Owner name.
        type: str
      group:
        description: Group name.
        type: str
  repository_files:
    description: Paths among O(files) that belong to the apt repository (sources, pin); one differing sets RV(needs.repository).
    type: list
    elements: path
    default: []
  keyring:
    description:
      - The repository keyring. Listed with C(gpg --show-keys --with-colons) in a throw-away GnuPG home, as the role's
        C(repository.yml) does; RV(key_download_reason) says why a new key must be downloaded (gpg missing, an
        unreadable keyring, not a regular file mode 644 owned by root:root, no key of O(repo_key_fingerprints), or
        none that is valid for O(repo_key_min_validity_days) more days), and sets RV(needs.repository).
    type: path
  repo_key_fingerprints:
    description: C(nvidia_driver_repo_key_fingerprints); spaces and case do not matter.
    type: list
    elements: str
    default: []
  repo_key_min_validity_days:
    description: C(nvidia_driver_repo_key_min_validity_days).
    type: int
    default: 30
  repo_url:
    description:
      - C(nvidia_driver_repo_url). Other C(*.list)/C(*.sources) files in C(/etc/apt/sources.list.d) naming it are
        returned in RV(other_sources) and refused in RV(refusals). Empty skips the check.
    type: str
    default: ""
  repo_sources_file:
    description: C(nvidia_driver_repo_sources_file), the one source file for O(repo_url) that the role manages.
    type: path
  options_file:
    description: The kernel module options file among O(files); a difference is a reboot reason.
    type: path
  headers_package:
    description:
      - The kernel headers package the role installs for DKMS (C(nvidia_driver_kernel_headers_package)); empty when
        it installs none. Not installed sets RV(needs.headers).
    type: str
    default: ""
  persistenced:
    description: C(nvidia_driver_persistenced).
    type: bool
    default: false
  kernel_module_steps:
    description: C(nvidia_driver_kernel_module_steps) (nvidia-persistenced must also be active when true).
    type: bool
    default: true
  secure_boot:
    description: C(nvidia_driver_secure_boot).
    type: str
    choices: [auto, enabled, disabled]
    default: auto
  allow_proprietary:
    description: C(nvidia_driver_allow_proprietary) (the proprietary module on Turing-or-newer, pre-Blackwell GPUs).
    type: bool
    default: false
  mok_key:
    description: C(nvidia_driver_mok_key); with Secure Boot on and DKMS modules it must exist on the host.
    type: str
    default: ""
  mok_certificate:
    description: C(nvidia_driver_mok_certificate); with Secure Boot on and DKMS modules it must exist and be enrolled (C(mokutil --test-key)).
    type: str
    default: ""
  controller_machine_id:
    description: The controller's C(/etc/machine-id) (the role looks it up on the controller).
    type: str
    default: ""
  connection:
    description: C(ansible_connection).
    type: str
    default: ssh
  inventory_hostname:
    description: C(inventory_hostname).
    type: str
    default: ""
  ansible_host:
    description: C(ansible_host).
    type: str
  gpu_info:
    description: The gpu_info facts (from M(gpufleet.llm_server.gpu_info), or preflight's when its C(read_with) matches).
    type: dict
    default: {}
  installed_version:
    description: With O(mode=verify), the driver version the role installed; omitted, C(dpkg-query) is asked.
    type: str
  expected_gpu_count:
    description: With O(mode=verify), C(nvidia_driver_expected_gpu_count); 0 counts the NVIDIA GPUs outside vfio-pci.
    type: int
    default: 0
attributes:
  check_mode:
    support: full
    description: Read-only in O(mode=state) and O(mode=verify), which run the same in check mode; O(mode=record) writes nothing in check mode.
  diff_mode:
    support: none
    description: >-
      Changes nothing but the keep record (a cache of apt's judgement, not configuration), so there is nothing to
      diff; the writers the role runs on RV(needs) show theirs.
  platform:
    support: full
    platforms: debian
    description: Reads dpkg's database; Debian and Ubuntu hosts.
notes:
  - Every comparison errs towards "differs"; a writer that then finds nothing to change reports ok.
seealso:
  - module: gpufleet.llm_server.apt_transaction
  - module: gpufleet.llm_server.gpu_info
"""

EXAMPLES = r"""
- name: Store apt's judgement after an apt run (the next no-op skips apt while it holds)
  gpufleet.llm_server.nvidia_driver_state:
    mode: record
    keep_record: /var/lib/gpufleet/nvidia-driver-keep.json
    package_data: "{{ __nvidia_driver_data }}"
    source: "{{ nvidia_driver_source }}"
    distribution: "{{ nvidia_driver_distribution }}"
    branch: "{{ nvidia_driver_branch | string }}"
    kernel_release: "{{ ansible_facts.kernel }}"
    apt_packages: "{{ __nvidia_driver_install.packages }}"
    apt_driver_version: "{{ __nvidia_driver_install.driver_version }}"
  changed_when: false

- name: Read the driver host's state
  gpufleet.llm_server.nvidia_driver_state:
    package_data: "{{ __nvidia_driver_data }}"
    source: "{{ nvidia_driver_source }}"
    distribution: "{{ nvidia_driver_distribution }}"
    branch: "{{ nvidia_driver_branch | string }}"
    flavor: "{{ nvidia_driver_flavor }}"
    kernel_release: "{{ ansible_facts.kernel }}"
    version_from: "{{ __nvidia_driver_version_from }}"
    preferences: "{{ __nvidia_driver_planned_preferences }}"
    files:
      - path: /etc/modprobe.d/gpufleet-blacklist-nouveau.conf
        content: "{{ lookup('ansible.builtin.template', 'blacklist-nouveau.conf.j2') }}"
        mode: "0644"
        owner: root
        group: root
    gpu_info: "{{ ansible_facts.gpu_info }}"
  register: __nvidia_driver_state

- name: Judge the loaded driver
  gpufleet.llm_server.nvidia_driver_state:
    mode: verify
    branch: "580"
    gpu_info: "{{ ansible_facts.gpu_info }}"
  register: __nvidia_driver_verify
"""

RETURN = r"""
needs:
  description: What the role has to change (mode V(state)).
  returned: mode is state
  type: dict
  contains:
    packages:
      description: Plan with apt (the fast keep did not hold or, with O(keep_record), the record does not vouch for it).
      type: bool
    holds:
      description: Holds to add or release.
      type: bool
    files:
      description: Paths of O(files) that differ.
      type: list
      elements: str
    directories:
      description: Paths of O(directories) that differ.
      type: list
      elements: str
    repository:
      description: A repository file differs or the keyring needs a new key (RV(key_download_reason)).
      type: bool
    persistenced:
      description: nvidia-persistenced is not enabled (or not active with kernel module steps).
      type: bool
    headers:
      description: O(headers_package) is not installed.
      type: bool
  sample: {packages: false, holds: false, files: [], directories: [], repository: false, persistenced: false, headers: false}
reasons:
  description: Why each need is set, per path or need.
  returned: mode is state
  type: dict
  sample: {files: {/etc/modprobe.d/gpufleet-nvidia.conf: [content differs]}, packages: []}
key_download_reason:
  description: Why the repository key must be downloaded (the role's words), empty when the keyring will do or without O(keyring).
  returned: mode is state
  type: str
other_sources:
  description: Other apt source files pointing at O(repo_url).
  returned: mode is state
  type: list
  elements: str
refusals:
  description:
    - What the role must refuse before any change, in its own words (empty when nothing); the module itself does not fail.
    - A proprietary module on GPUs that need the open one (Blackwell, or the kernel log said so), a proprietary module on
      Turing or newer without O(allow_proprietary), the open module on older GPUs, Secure Boot without a usable MOK
      (set, present, enrolled), other apt sources for O(repo_url), and with O(upgrade) false an installed stack of more
      than one driver version (RV(keep.mixed)).
  returned: mode is state
  type: list
  elements: str
fast_keep:
  description: The fast keep holds and O(keep_record) vouches for it (the request, indexes and stack apt agreed on are unchanged).
  returned: mode is state
  type: bool
record:
  description: With O(mode=record), the record written, or null when it was removed.
  returned: mode is record
  type: dict
record_reasons:
  description: With O(mode=record), why no record could be stored (empty when it was).
  returned: mode is record
  type: list
  elements: str
keep:
  description: The fast keep decision.
  returned: mode is state
  type: dict
  contains:
    keep:
      description: The installed packages are the requested driver; apt would install and remove nothing.
      type: bool
    plan:
      description: V(keep) or V(plan with apt).
      type: str
    reasons:
      description: Each condition that failed.
      type: list
      elements: str
    installed_keep:
      description:
        - The installed packages alone are the requested driver at one version and O(upgrade) is false (no package
          missing or half-installed, branch and O(version) as asked, not mixed). The role then changes no driver
          package, whatever the repositories publish; only whether apt must run is still open (RV(keep.keep)).
      type: bool
    installed_reasons:
      description: The conditions of RV(keep.installed_keep) that failed.
      type: list
      elements: str
    mixed:
      description:
        - The installed stack grouped by version when it is more than one driver version, else empty. With O(upgrade)
          false it is refused (RV(refusals)) before any change.
      type: dict
    packages:
      description: The installed driver stack, as apt_transaction reports it.
      type: list
      elements: dict
    driver_version:
      description: The stack's driver version.
      type: str
    holds_missing:
      description: Stack packages to hold (hold lock).
      type: list
      elements: str
    holds_extra:
      description: Held stack packages to release (no hold lock).
      type: list
      elements: str
    record_reasons:
      description: Why O(keep_record) does not vouch for the fast keep (empty when it does, or without O(keep_record)).
      type: list
      elements: str
  sample: {keep: true, plan: keep, reasons: [], driver_version: "580.173.02", holds_missing: [], holds_extra: []}
index_signature:
  description: >-
    Digest of the apt index files (names, sizes, mtimes) and of the sources and preference files; pass it back as
    O(agreed_index_signature), or let O(keep_record) keep it.
  returned: mode is state or mode is record
  type: str
wanted:
  description: The packages the role asks apt for.
  returned: mode is state
  type: list
  elements: str
installed_stack_names:
  description: The installed packages matching the branch's stack patterns (what dpkg can hold now, also in check mode).
  returned: mode is state
  type: list
  elements: str
install_first:
  description: The pinning package installed first (pin lock), else empty.
  returned: mode is state
  type: list
  elements: str
reboot_reasons:
  description: Why the loaded module must change (the role's kernel.yml words).
  returned: mode is state
  type: list
  elements: str
secure_boot_on:
  description: Secure Boot is on.
  returned: mode is state
  type: bool
is_control_node:
  description: The target is the controller.
  returned: mode is state
  type: bool
resources:
  description: Each resource read, as C({kind, name}) (the no-op floor of benchmarks/noop_floor.py uses it).
  returned: mode is state
  type: list
  elements: dict
verification:
  description: Each check as C({check, status, detail, fix}), status V(pass), V(fail) or V(not_checked).
  returned: mode is verify
  type: list
  elements: dict
failed:
  description: The failure message naming each failed check and its fix, empty when none failed. The module does not fail on it.
  returned: mode is verify
  type: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.host_state import read_file

from ansible_collections.gpufleet.llm_server.plugins.module_utils.nvidia_driver_rules import RulesError
from ansible_collections.gpufleet.llm_server.plugins.module_utils.nvidia_driver_state import HostIO, read_state

PATH_SPEC = dict(path=dict(type="path", required=True), mode=dict(type="str"), owner=dict(type="str"),
                 group=dict(type="str"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="state", choices=["state", "record", "verify"]),
            package_data=dict(type="dict", default={}),
            source=dict(type="str", default="nvidia"),
            distribution=dict(type="str", default=""),
            branch=dict(type="str", required=True),
            flavor=dict(type="str", default="open", choices=["open", "proprietary"]),
            profile=dict(type="str", default="compute", choices=["compute", "full"]),
            kernel_modules=dict(type="str", default="dkms", choices=["dkms", "precompiled"]),
            kernel_flavor=dict(type="str", default=""),
            kernel_release=dict(type="str", default=""),
            distribution_version=dict(type="str", default=""),
            version=dict(type="str", default=""),
            upgrade=dict(type="bool", default=False),
            hold=dict(type="bool", default=True),
            version_from=dict(type="str", default="^(lib)?nvidia-"),
            version_pin_prefix=dict(type="str", default="nvidia-driver-pinning-"),
            preferences=dict(type="dict", default={}),
            preferences_dir=dict(type="path", default="/etc/apt/preferences.d"),
            agreed_index_signature=dict(type="str"),
            keep_record=dict(type="path"),
            apt_packages=dict(type="list", elements="dict", default=[]),
            apt_driver_version=dict(type="str", default=""),
            files=dict(type="list", elements="dict", default=[], options=dict(PATH_SPEC, content=dict(type="str"))),
            directories=dict(type="list", elements="dict", default=[], options=PATH_SPEC),
            repository_files=dict(type="list", elements="path", default=[]),
            keyring=dict(type="path"),
            repo_key_fingerprints=dict(type="list", elements="str", default=[], no_log=False),
            repo_key_min_validity_days=dict(type="int", default=30, no_log=False),
            repo_url=dict(type="str", default=""),
            repo_sources_file=dict(type="path"),
            options_file=dict(type="path"),
            headers_package=dict(type="str", default=""),
            persistenced=dict(type="bool", default=False),
            kernel_module_steps=dict(type="bool", default=True),
            secure_boot=dict(type="str", default="auto", choices=["auto", "enabled", "disabled"]),
            allow_proprietary=dict(type="bool", default=False),
            mok_key=dict(type="str", default="", no_log=False),
            mok_certificate=dict(type="str", default=""),
            controller_machine_id=dict(type="str", default=""),
            connection=dict(type="str", default="ssh"),
            inventory_hostname=dict(type="str", default=""),
            ansible_host=dict(type="str"),
            gpu_info=dict(type="dict", default={}),
            installed_version=dict(type="str"),
            expected_gpu_count=dict(type="int", default=0),
        ),
        supports_check_mode=True,
        required_if=[("mode", "record", ("keep_record",))],
    )

    def run(argv):
        binary = module.get_bin_path(argv[0])
        if binary is None:
            return None
        return module.run_command([binary] + argv[1:], environ_update={"LC_ALL": "C", "LANG": "C"})

    try:
        result = read_state(module.params, HostIO(run))
    except RulesError as exc:
        module.fail_json(msg=str(exc))
    except ValueError as exc:
        module.fail_json(msg="nvidia_driver_state: %s. Give file and directory modes as octal strings such as '0644'." % exc)
    if module.params["mode"] == "record":
        result["changed"] = store_record(module, module.params["keep_record"], result["record"])
        module.exit_json(**result)
    module.exit_json(changed=False, **result)


def store_record(module, path, record):
    """Write the record atomically (root, 0644), or remove it when None; True when the file changed."""
    current = read_file(path)
    wanted = None if record is None else (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")
    if current == wanted:
        return False
    if module.check_mode:
        return True
    if wanted is None:
        try:
            os.unlink(path)
        except OSError as exc:
            module.fail_json(msg="nvidia_driver_state: cannot remove the stale keep record %s: %s" % (path, exc))
        return True
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nvidia-driver-keep.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(wanted)
        os.chmod(tmp, 0o644)
    except OSError as exc:
        module.fail_json(msg="nvidia_driver_state: cannot write the keep record %s: %s. The driver is installed; "
                             "only the next run's fast keep is lost (apt plans again)." % (path, exc))
    module.atomic_move(tmp, path)
    return True


if __name__ == "__main__":
    main()
