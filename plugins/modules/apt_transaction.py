#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_transaction
short_description: Plan, check and apply one apt transaction (install these, remove those) before changing anything
version_added: "0.2.0"
description:
  - Plans the transaction with apt itself (C(apt-cache policy), C(apt-get -s install)), then applies it. Nothing
    on the host changes before the plan succeeded.
  - Every package in O(install_first) and O(install) must be offered by a configured repository (have an apt
    candidate); otherwise the module refuses, lists the names apt does offer that match O(offered_pattern) and
    appends O(fix) to the message.
  - O(install_first) packages (a driver pinning package whose apt preference file decides which versions the rest
    resolves to) are installed in their own apt run before the rest. For the plan, they are downloaded (not
    installed) and the preference files they ship are applied to a private copy of C(/etc/apt/preferences.d), so
    the plan and check mode see the versions the real run will get.
  - O(remove) names installed packages (fnmatch patterns) to remove in the same transaction, except any package
    the new set depends on (its C(apt-cache depends --recurse) closure), so leaving an old driver stack never
    removes part of the new one.
  - Reports the packages and the NVIDIA driver version (highest C(NNN.N[.N]) version among the closure's packages
    matching O(driver_version_from)) the transaction leaves installed, read back from dpkg after a real run.
author:
  - gpufleet maintainers (@gpufleet)
options:
  install:
    description: Packages that must be installed after the transaction (names only; versions come from apt's preferences).
    type: list
    elements: str
    required: true
  install_first:
    description: Packages installed in their own apt run before O(install) is resolved (e.g. C(nvidia-driver-pinning-590)).
    type: list
    elements: str
    default: []
  remove:
    description:
      - fnmatch patterns of installed packages to remove in the same transaction (e.g. C(*nvidia*-580)); packages in the
        dependency closure of O(install_first) and O(install) are never removed.
    type: list
    elements: str
    default: []
  preferences:
    description:
      - 'Files of C(/etc/apt/preferences.d) as the play will leave them, for the plan: C({name: content}); an empty
        content means the play removes that file. In check mode (and before the play writes them) the plan must see
        them; a real run uses the files on the host only.'
    type: dict
    default: {}
  no_upgrade:
    description:
      - Keep the O(install) packages that are installed at their installed version (apt-get C(--no-upgrade), what
        C(state=present) does); apt still changes them when something else in the transaction requires it.
      - The dependency closure that O(remove) spares then also follows the INSTALLED versions' relations (dpkg's status),
        so a package the installed stack needs is never removed because a newer candidate depends on another name;
        RV(moved) lists any operation that would still touch the installed stack.
    type: bool
    default: false
  plan_only:
    description: Only plan (as in check mode), even in a normal run.
    type: bool
    default: false
  install_recommends:
    description: Install recommended packages too.
    type: bool
    default: false
  offered_pattern:
    description: POSIX regex of the package names listed as offered when a wanted package is not.
    type: str
    default: '^(lib)?nvidia-|^cuda-drivers|^linux-modules-nvidia-'
  driver_version_from:
    description: Python regex of the package names whose version counts as the driver version.
    type: str
    default: '^(lib)?nvidia-'
  fail_on_missing:
    description: Fail when a wanted package is not offered. With V(false) the result carries RV(missing) and RV(offered).
    type: bool
    default: true
  fix:
    description: Text appended to the refusal message (which variable to change).
    type: str
    default: ""
notes:
  - Runs apt with C(--allow-downgrades), C(--allow-change-held-packages) and C(--ignore-hold) - the caller manages the holds
    of the packages it installs and changes versions on purpose (a pin allowing downgrades is how NVIDIA switches
    branches; a held stack must move as a whole when its version pin changes).
  - The plan writes only below a private temporary directory (downloaded pinning packages, the preferences copy).
seealso:
  - module: ansible.builtin.apt
  - name: NVIDIA driver installation guide, version locking
    description: The nvidia-driver-pinning packages this module applies before planning.
    link: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/version-locking.html
attributes:
  check_mode:
    support: full
    description: Plans the transaction and reports what it would install and remove; nothing is installed.
  diff_mode:
    support: full
    description: Shows the version of each package the transaction touches before and after.
  platform:
    support: full
    platforms: debian
    description: Debian and Ubuntu (apt, dpkg).
"""

EXAMPLES = r"""
- name: NVIDIA's repository, branch 590, compute-only, open kernel module
  gpufleet.llm_server.apt_transaction:
    install_first: [nvidia-driver-pinning-590]
    install: [libnvidia-compute, nvidia-dkms-open]
    remove: ["*nvidia*-580", "*nvidia*-580-open"]
    fix: Set nvidia_driver_branch to a branch the repository offers.

- name: Plan only (also what check mode does)
  gpufleet.llm_server.apt_transaction:
    install: [nvidia-headless-595-open, nvidia-utils-595]
    plan_only: true
    fail_on_missing: false
  register: plan
"""

RETURN = r"""
missing:
  description: Wanted packages apt does not offer (no candidate).
  returned: always
  type: list
  elements: str
offered:
  description: Package names apt offers that match O(offered_pattern) (only when RV(missing) is not empty).
  returned: always
  type: list
  elements: str
install_first:
  description: The O(install_first) packages not yet installed at their candidate version.
  returned: success
  type: list
  elements: str
installed:
  description: Packages the transaction installs, upgrades or downgrades (planned in check mode).
  returned: success
  type: list
  elements: dict
  contains:
    name: {description: Package name., type: str}
    version: {description: Version installed., type: str}
    previous: {description: Version before (null when new)., type: str}
removed:
  description: Packages the transaction removes (requested or because of Conflicts).
  returned: success
  type: list
  elements: dict
packages:
  description: Packages of the dependency closure left installed that match O(driver_version_from) or were asked for.
  returned: success
  type: list
  elements: dict
  sample: [{name: nvidia-dkms-open, version: 590.48.01-1ubuntu1}]
driver_version:
  description: Upstream NVIDIA driver version the transaction leaves installed (empty when none).
  returned: success
  type: str
  sample: "590.48.01"
held_changed:
  description: Held packages the transaction changes.
  returned: success
  type: list
  elements: str
mixed:
  description:
    - When the stack the plan leaves (or, after a real run, the stack read back from dpkg) is not one driver version,
      its packages grouped by version (C(apt_transaction.mixed_stack)); empty otherwise. A real run that leaves a
      mixed stack fails, naming what it changed.
  returned: success
  type: dict
  sample: {"580.159.03-0ubuntu0.24.04.1": [nvidia-headless-580-open], "580.173.02-0ubuntu0.24.04.1": [nvidia-dkms-580-open]}
moved:
  description:
    - With O(no_upgrade), the planned operations (install or remove) on packages the installed wanted packages
      depend on (the closure over the installed versions' relations); a keep plan has none.
  returned: success
  type: list
  elements: dict
held:
  description: Held packages among RV(packages) (before the transaction; planned state).
  returned: success
  type: list
  elements: str
commands:
  description: The apt commands run (simulations and real runs).
  returned: always
  type: list
  elements: str
"""

import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.apt_transaction import (
    AptError,
    AptTransaction,
    describe_mixed,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            install=dict(type="list", elements="str", required=True),
            install_first=dict(type="list", elements="str", default=[]),
            remove=dict(type="list", elements="str", default=[]),
            preferences=dict(type="dict", default={}),
            no_upgrade=dict(type="bool", default=False),
            plan_only=dict(type="bool", default=False),
            install_recommends=dict(type="bool", default=False),
            offered_pattern=dict(type="str", default=r"^(lib)?nvidia-|^cuda-drivers|^linux-modules-nvidia-"),
            driver_version_from=dict(type="str", default=r"^(lib)?nvidia-"),
            fail_on_missing=dict(type="bool", default=True),
            fix=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for tool in ("apt-get", "apt-cache", "dpkg-query", "dpkg-deb"):
        module.get_bin_path(tool, required=True)

    def run(argv, environ_update=None, cwd=None):
        return module.run_command(argv, environ_update=environ_update, cwd=cwd)

    with tempfile.TemporaryDirectory(prefix="gpufleet-apt-") as workdir:
        transaction = AptTransaction(
            run, workdir, params["install"], install_first=params["install_first"], remove=params["remove"],
            preferences=params["preferences"], driver_version_from=params["driver_version_from"],
            offered_pattern=params["offered_pattern"], install_recommends=params["install_recommends"],
            no_upgrade=params["no_upgrade"])
        try:
            plan = transaction.plan()
        except AptError as exc:
            module.fail_json(msg=("%s: %s %s" % (exc, " ".join(exc.output.split()[-60:]), params["fix"])).strip(),
                             apt_output=exc.output, commands=transaction.commands)

        result = dict(changed=False, missing=plan["missing"], offered=plan["offered"], commands=transaction.commands)
        if plan["missing"]:
            if params["fail_on_missing"]:
                module.fail_json(
                    msg="Not offered by any configured apt repository: %s. The repositories offer: %s. %s" % (
                        ", ".join(plan["missing"]), ", ".join(plan["offered"]) or "no package matching %s" % params["offered_pattern"],
                        params["fix"]),
                    **result)
            module.exit_json(**result)

        changes = plan["installed"] + plan["removed"]
        result.update(
            changed=bool(changes), install_first=plan["install_first"], installed=plan["installed"],
            removed=plan["removed"], packages=plan["packages"], driver_version=plan["driver_version"],
            held_changed=plan["held_changed"], held=plan["held"], mixed=plan["mixed"], moved=plan["moved"])
        if module._diff:
            result["diff"] = {
                "before": "".join("%s %s\n" % (op["name"], op["previous"] or "(not installed)") for op in changes),
                "after": "".join("%s %s\n" % (op["name"], op["version"] if op in plan["installed"] else "(removed)")
                                 for op in changes),
            }
        if module.check_mode or params["plan_only"] or not changes:
            module.exit_json(**result)

        try:
            state = transaction.apply(plan)
        except AptError as exc:
            module.fail_json(msg="%s: %s" % (exc, " ".join(exc.output.split()[-80:])), apt_output=exc.output,
                             commands=transaction.commands, planned=changes)
        result.update(packages=state["packages"], driver_version=state["driver_version"], commands=transaction.commands,
                      mixed=state["mixed"])
        if state["mixed"]:
            module.fail_json(msg=("The apt transaction ran (%s) but left a driver stack of more than one version: %s. %s" % (
                "; ".join("%s %s" % (op["op"], op["name"]) for op in changes), describe_mixed(state["mixed"]),
                params["fix"])).strip(), **result)
        module.exit_json(**result)


if __name__ == "__main__":
    main()
