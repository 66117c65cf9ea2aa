# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The reads of gpufleet.llm_server.nvidia_driver_state: everything the nvidia_driver role needs to know about
a host in one module call, read-only, and what has to change (issue 20). Decisions are in nvidia_driver_rules.

`read_state(params, io)`: params are the module's options; io bundles the host access (so tests run it
against a tree in tmp_path): read(path) -> bytes|None, stat(path) -> os.stat_result|None, run(argv) ->
(rc, out, err) or None when the command is absent, root: a prefix for every absolute path ('' on a host).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time

from ansible_collections.gpufleet.llm_server.plugins.module_utils import apt_transaction as at
from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import nvidia_driver_rules as rules

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
SMI_QUERY = ["nvidia-smi", "--query-gpu=pci.bus_id,name,driver_version", "--format=csv,noheader"]


class HostIO:
    """Real host access (a module passes its run_command)."""

    def __init__(self, run, root=""):
        self._run = run
        self.root = root.rstrip("/")

    def path(self, path):
        return self.root + path if self.root else path

    def read(self, path):
        return hs.read_file(self.path(path))

    def stat(self, path):
        return hs.lstat(self.path(path))

    def run(self, argv):
        return self._run(argv)


def _file_reasons(io, specs):
    reasons = {}
    for spec in specs:
        state = hs.file_state(io.path(spec["path"]))
        why = hs.compare_file(spec, state)
        if why:
            reasons[spec["path"]] = why
    return reasons


def _directory_reasons(io, specs):
    reasons = {}
    for spec in specs:
        why = hs.compare_directory(spec, hs.file_state(io.path(spec["path"])))
        if why:
            reasons[spec["path"]] = why
    return reasons


def _persistenced_needs(io, params):
    if not params["persistenced"]:
        return []
    result = io.run(["systemctl", "show", "-p", "UnitFileState", "-p", "ActiveState", "nvidia-persistenced.service"])
    if result is None or result[0] != 0:
        return ["systemctl could not answer"]
    unit = (hs.parse_systemctl_show(result[1]) or [{}])[0]
    reasons = []
    if unit.get("UnitFileState") != "enabled":
        reasons.append("nvidia-persistenced is %s, wanted enabled" % (unit.get("UnitFileState") or "unknown"))
    if params["kernel_module_steps"] and unit.get("ActiveState") != "active":
        reasons.append("nvidia-persistenced is %s, wanted active" % (unit.get("ActiveState") or "unknown"))
    return reasons


def _keyring_reason(io, params):
    """repository.yml's keyring read: gpg lists the keyring in a throw-away home; '' when it will do."""
    keyring = params["keyring"]
    home = tempfile.mkdtemp(prefix="gpufleet-gpg-")
    try:
        result = io.run(["gpg", "--homedir", home, "--batch", "--show-keys", "--with-colons", "--", io.path(keyring)])
    finally:
        shutil.rmtree(home, ignore_errors=True)
    keys = rules.parse_gpg_colons(result[1], int(time.time()), params["repo_key_min_validity_days"]) \
        if result is not None and result[0] == 0 else []
    return rules.keyring_download_reason(keyring, result is not None, result[0] if result is not None else None,
                                         rules.stat_description(hs.file_state(io.path(keyring))), keys,
                                         params["repo_key_fingerprints"], params["repo_key_min_validity_days"])


def _duplicate_sources(io, params):
    """Other files in /etc/apt/sources.list.d naming the repository URL (repository.yml's find)."""
    directory = "/etc/apt/sources.list.d"
    try:
        names = sorted(os.listdir(io.path(directory)))
    except OSError:
        names = []
    listing = []
    for name in names:
        path = os.path.join(directory, name)
        info = io.stat(path)
        if info is not None and stat.S_ISREG(info.st_mode):
            listing.append((name, io.read(path)))
    found = rules.duplicate_sources(listing, params["repo_url"], os.path.basename(params["repo_sources_file"] or ""))
    return [os.path.join(directory, name) for name in found]


def _secure_boot_refusals(io, params, secure_boot):
    """refuse.yml's Secure Boot checks: a MOK pair is set, its files exist, mokutil knows the certificate."""
    missing_pair = rules.secure_boot_refusal(secure_boot, params["secure_boot"], params["kernel_modules"],
                                             params["mok_key"], params["mok_certificate"])
    if missing_pair:
        return [missing_pair]
    if not secure_boot or params["kernel_modules"] != "dkms":
        return []
    missing = [path for path in (params["mok_key"], params["mok_certificate"]) if io.stat(path) is None]
    if missing:
        return rules.mok_refusals(missing, params["mok_certificate"], None)
    answer = io.run(["mokutil", "--test-key", params["mok_certificate"]])
    return rules.mok_refusals([], params["mok_certificate"], answer[1] if answer is not None else None)


def _installed_from_smi_owner(io):
    """verify.yml:28-49: which package ships /usr/bin/nvidia-smi, and its version (read-only)."""
    owner = io.run(["dpkg-query", "-S", "/usr/bin/nvidia-smi"])
    if owner is None or owner[0] != 0:
        return "", ""
    name = owner[1].split(":")[0].strip()
    version = io.run(["dpkg-query", "-W", "-f=${Version}", name])
    if version is None or version[0] != 0:
        return "", ""
    return at.upstream(version[1].strip()), "%s %s" % (name, version[1].strip())


def verification(io, params, gpu_info):
    smi_result = io.run(SMI_QUERY)
    if smi_result is None:
        smi = {"rc": None, "stdout": "", "msg": "[Errno 2] No such file or directory: b'nvidia-smi'"}
    else:
        smi = {"rc": smi_result[0], "stdout": (smi_result[1] or "").rstrip("\n"), "msg": ""}
    if params["installed_version"] is not None:
        installed, installed_from = params["installed_version"], "the packages this run installed"
    else:
        installed, installed_from = _installed_from_smi_owner(io)
    return rules.judge(gpu_info, params["flavor"], params["branch"], params["version"], params["expected_gpu_count"],
                       smi, installed, installed_from)


APT_CONFIG_FILES = ("/etc/apt/sources.list", "/etc/apt/preferences")
APT_CONFIG_DIRS = ("/etc/apt/sources.list.d",)


def _apt_files(io, preferences_dir):
    """{path: bytes or None} of the sources and preference files apt resolves with (both directories listed)."""
    files = {path: io.read(path) for path in APT_CONFIG_FILES}
    for directory in APT_CONFIG_DIRS + (preferences_dir,):
        try:
            names = sorted(os.listdir(io.path(directory)))
        except OSError:
            names = []
        for name in names:
            path = os.path.join(directory, name)
            files[path] = io.read(path)
    return files


def _packages(params, io):
    """dpkg's view of the driver packages: (packages, installed, wanted, first, keep, signature, request)."""
    entry = rules.select_entry(params["package_data"], params["source"], params["distribution"], params["branch"])
    rules.check_entry(entry, params["source"], params["distribution"], params["branch"], params["flavor"],
                      params["profile"], params["kernel_modules"])
    status_text = io.read(hs.DPKG_STATUS)
    packages = hs.parse_dpkg_status_file(status_text.decode("utf-8", "replace") if status_text else "")
    installed, _held = hs.installed_and_held(packages)
    kernel_flavor = rules.kernel_flavor_found(params["kernel_flavor"], params["kernel_release"],
                                              params["distribution_version"], installed)
    wanted = rules.wanted_packages(entry, params["flavor"], params["profile"], params["kernel_modules"], kernel_flavor)
    first = rules.install_first(entry, params["version"], params["version_pin_prefix"])
    leave = rules.leave_patterns(params["package_data"], params["distribution"])
    preferences_dir = params["preferences_dir"]
    on_disk = {name: io.read(os.path.join(preferences_dir, name)) for name in params["preferences"]}
    signature = rules.index_signature(hs.lists_entries(io.path("/var/lib/apt/lists")), _apt_files(io, preferences_dir))
    keep = rules.fast_keep(packages, wanted, first, leave, params["version_from"], params["branch"], params["version"],
                           params["upgrade"], entry["lock"] == "hold" and params["hold"], rules.stack_re(entry),
                           params["preferences"], on_disk, signature, params["agreed_index_signature"])
    keep["plan"] = "keep" if keep["keep"] else rules.PLAN_WITH_APT
    request = rules.keep_request(params["source"], params["distribution"], params["branch"], params["version"],
                                 params["flavor"], params["profile"], params["kernel_modules"], wanted, first, leave,
                                 params["version_from"])
    return packages, installed, wanted, first, keep, signature, request


def record_state(params, io):
    """mode=record, after a real apt run: the record to store (or None) and why not. Nothing is written here."""
    _dpkg, _installed, _wanted, _first, keep, signature, request = _packages(params, io)
    reasons = rules.recordable_reasons(keep, params["apt_packages"], params["apt_driver_version"])
    record = None if reasons else rules.keep_record(request, signature, keep["packages"], keep["driver_version"])
    return {"record": record, "record_reasons": reasons, "index_signature": signature}


def read_state(params, io):
    """-> the module's result (without `changed`). Raises rules.RulesError on package data it cannot use."""
    gpu_info = params["gpu_info"] or {}
    if params["mode"] == "record":
        return record_state(params, io)
    if params["mode"] == "verify":
        checks = verification(io, params, gpu_info)
        return {"verification": checks, "failed": rules.failed_message(params["inventory_hostname"], checks)}

    _dpkg, installed, wanted, first, keep, signature, request = _packages(params, io)
    stack = rules.stack_re(rules.select_entry(params["package_data"], params["source"], params["distribution"],
                                              params["branch"]))
    preferences_dir = params["preferences_dir"]
    stored = rules.parse_keep_record(io.read(params["keep_record"])) if params["keep_record"] else None
    record_reasons = rules.keep_record_reasons(stored, request, signature, keep["packages"], keep["driver_version"]) \
        if params["keep_record"] else []
    keep["record_reasons"] = record_reasons
    fast = rules.fast_path(keep, record_reasons, params["upgrade"], False) if params["keep_record"] else False

    files = _file_reasons(io, params["files"])
    directories = _directory_reasons(io, params["directories"])
    keyring = params["keyring"]
    repository = sorted(path for path in files if path in params["repository_files"])
    key_reason = _keyring_reason(io, params) if keyring else ""
    if key_reason:
        repository.append(key_reason)
    other_sources = _duplicate_sources(io, params) if params["repo_url"] else []
    refusals = rules.module_refusals(gpu_info, params["flavor"], params["allow_proprietary"], params["inventory_hostname"])
    if keep["mixed"] and not params["upgrade"]:
        refusals.append(rules.mixed_stack_refusal(params["inventory_hostname"], keep["mixed"], params["branch"],
                                                  params["version"]))
    persistenced = _persistenced_needs(io, params)
    headers = params["headers_package"]
    headers_missing = [headers] if headers and headers not in installed else []

    efivar = io.read(SECURE_BOOT_VAR) if params["secure_boot"] == "auto" else None
    secure_boot = rules.secure_boot_on(params["secure_boot"], efivar)
    refusals += _secure_boot_refusals(io, params, secure_boot)
    if other_sources:
        refusals.append(rules.duplicate_source_message(other_sources, params["repo_url"], params["repo_sources_file"]))
    machine_id = io.read("/etc/machine-id")
    installed_version = keep["driver_version"] if keep["keep"] else ""
    options_file = params["options_file"]
    resources = ([{"kind": "dpkg", "name": hs.DPKG_STATUS}]
                 + [{"kind": "file", "name": spec["path"]} for spec in params["files"]]
                 + [{"kind": "directory", "name": spec["path"]} for spec in params["directories"]]
                 + [{"kind": "file", "name": os.path.join(preferences_dir, name)} for name in params["preferences"]]
                 + ([{"kind": "file", "name": params["keep_record"]}] if params["keep_record"] else [])
                 + ([{"kind": "file", "name": keyring}] if keyring else [])
                 + ([{"kind": "directory", "name": "/etc/apt/sources.list.d"}] if params["repo_url"] else [])
                 + ([{"kind": "service", "name": "nvidia-persistenced"}] if params["persistenced"] else []))
    return {
        "needs": {
            "packages": not (fast if params["keep_record"] else keep["keep"]),
            "holds": bool(keep["holds_missing"] or keep["holds_extra"]),
            "files": sorted(files),
            "directories": sorted(directories),
            "repository": bool(repository),
            "persistenced": bool(persistenced),
            "headers": bool(headers_missing),
        },
        "reasons": {"files": files, "directories": directories, "repository": repository, "persistenced": persistenced,
                    "headers": ["not installed: %s" % name for name in headers_missing], "packages": keep["reasons"]},
        "key_download_reason": key_reason,
        "other_sources": other_sources,
        "refusals": refusals,
        "keep": keep,
        "fast_keep": fast,
        "index_signature": signature,
        "wanted": wanted,
        "install_first": first,
        "installed_stack_names": sorted(name for name in installed if re.search(stack, name)),
        "reboot_reasons": rules.reboot_reasons(gpu_info, installed_version, params["flavor"],
                                               bool(options_file) and options_file in files),
        "secure_boot_on": secure_boot,
        "is_control_node": rules.is_control_node(params["connection"], params["inventory_hostname"], params["ansible_host"],
                                                 machine_id.decode("utf-8", "replace") if machine_id else "",
                                                 params["controller_machine_id"]),
        "resources": resources,
    }
