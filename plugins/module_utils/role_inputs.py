# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks of the roles' variables that need no host: the argument spec, then each role's own rules.

Used by the gpufleet.llm_server.role_inputs action (once per play in preflight, or at the start of a
role run alone). Everything here is pure: it gets already-templated values and returns messages.
The rules are the former assert tasks of the roles, with the same conditions and the same texts
(users, docs and tests know these words), so each message names the variable, the value and the fix.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_multinode import as_int

# Variables of the old single-checkout layout of sglang_build (not in its argument spec any more).
SGLANG_BUILD_FORMER_VARIABLES = ("sglang_build_checkout_dir", "sglang_build_install_mode", "sglang_build_verify_import")

# Variables a rule reads that are not options of the role's argument spec.
EXTRA_VARIABLES = {
    "sglang_build": SGLANG_BUILD_FORMER_VARIABLES,
    "sglang_service": ("inventory_hostname",),
}

_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"
_PLAIN_PATH = r"^/[A-Za-z0-9_./-]+$"
_NO_SPACE_PATH = r"^/[^\s]+$"
_DIRECTORY_NAME = r"^[A-Za-z0-9_.-]+$"
_DEVICE = r"^(char-[A-Za-z0-9_-]+|block-[A-Za-z0-9_-]+|/dev/\S+)( [rwm]+)?$"
_ADDRESS_FAMILY = r"^(AF_[A-Z0-9]+|none)$"


def _match(pattern, value):
    """Jinja's `is match` (re.match on the value's string form)."""
    return re.match(pattern, str(value)) is not None


def _type_name(value):
    """What `| type_debug` prints for plain YAML values."""
    for kind in (bool, int, float, str, list, dict):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def _names(entries, key):
    return [entry.get(key) if isinstance(entry, dict) else None for entry in entries]


def nvidia_driver_rules(v):
    """roles/nvidia_driver: the variable-only refusals (formerly tasks/validate.yml and refuse.yml's source check)."""
    out = []
    branch = v["nvidia_driver_branch"]
    if not _match(r"^[0-9]{3,4}$", branch):
        out.append("nvidia_driver_branch is '%s': it must be the driver branch number as a quoted string, e.g. "
                   "nvidia_driver_branch: \"590\" (the first number of the driver version 590.48.01)." % branch)
    flavor = v["nvidia_driver_flavor"]
    if flavor not in ("open", "proprietary"):
        out.append("nvidia_driver_flavor is '%s': use 'open' (NVIDIA's open kernel module, required on Blackwell) "
                   "or 'proprietary'." % flavor)
    profile, modules = v["nvidia_driver_profile"], v["nvidia_driver_kernel_modules"]
    if profile not in ("compute", "full") or modules not in ("dkms", "precompiled") or not (
            modules == "dkms" or profile == "compute"):
        out.append("nvidia_driver_profile is '%s' (compute|full) and nvidia_driver_kernel_modules is '%s' "
                   "(dkms|precompiled). Canonical's precompiled modules go with the compute profile only (the full "
                   "driver metapackages pull nvidia-dkms-<branch>): use nvidia_driver_profile: compute, or "
                   "nvidia_driver_kernel_modules: dkms." % (profile, modules))
    overrides = v["nvidia_driver_package_data_overrides"]
    if not isinstance(overrides, dict):
        out.append("nvidia_driver_package_data_overrides must be a mapping {source: {distribution: {branch: {...}}}} "
                   "merged over the role's vars/main.yml data, not %s." % _type_name(overrides))
    version = str(v["nvidia_driver_version"])
    if version and not re.match(r"^" + re.escape(str(branch)) + r"\.[0-9]+(\.[0-9]+)?(-[A-Za-z0-9.+~]+)?$", version):
        out.append("nvidia_driver_version is '%s' but nvidia_driver_branch is '%s': the pin must be a version of that "
                   "branch, e.g. \"%s.48.01\" or \"%s.48.01-0ubuntu1\", or \"\" for the newest of the branch."
                   % (version, branch, branch, branch))
    reboot, secure_boot = v["nvidia_driver_reboot"], v["nvidia_driver_secure_boot"]
    if reboot not in ("if_required", "never") or secure_boot not in ("auto", "enabled", "disabled"):
        out.append("Unknown choice: nvidia_driver_reboot '%s' (if_required|never), nvidia_driver_secure_boot '%s' "
                   "(auto|enabled|disabled)." % (reboot, secure_boot))
    options = v["nvidia_driver_module_options"]
    if not (isinstance(options, dict) and all(isinstance(value, dict) for value in options.values())
            and all(_match(r"^[a-z0-9_]+$", key) for key in options)):
        out.append("nvidia_driver_module_options is %s: it must map a module name to its options, e.g. "
                   "{nvidia: {NVreg_EnableGpuFirmware: 1}, nvidia_uvm: {uvm_disable_hmm: 1}}." % (options,))
    count = v["nvidia_driver_expected_gpu_count"]
    if not _match(r"^[0-9]+$", count):
        out.append("nvidia_driver_expected_gpu_count (default: llm_server_expected_gpu_count) is '%s': set it to the "
                   "number of GPUs nvidia-smi must list, or 0 for \"every NVIDIA GPU on the PCI bus\"." % count)
    margin = v["nvidia_driver_repo_key_min_validity_days"]
    if not _match(r"^[0-9]+$", margin):
        out.append("nvidia_driver_repo_key_min_validity_days is '%s': set the number of days (0 or more) a key must "
                   "still be valid before a run downloads it again, e.g. 30; 0 refreshes only an expired key." % margin)
    source = v["nvidia_driver_source"]
    if source not in ("ubuntu", "nvidia"):
        hint = ""
        if source == "nvidia_repo":
            hint = " The former value nvidia_repo is now nvidia."
        elif source == "distribution":
            hint = (" The former value distribution is now ubuntu (Debian's own archive is not supported: it packages "
                    "other branches).")
        out.append("nvidia_driver_source is '%s': use 'ubuntu' (Ubuntu's own archive, branch-suffixed packages such as "
                   "nvidia-headless-595-open) or 'nvidia' (NVIDIA's CUDA repository: nvidia-driver-pinning-<branch> "
                   "and unsuffixed packages from 590 on).%s" % (source, hint))
    return out


def cuda_toolkit_rules(v):
    """roles/cuda_toolkit: the version and NCCL pin formats."""
    out = []
    version = v["cuda_toolkit_version"]
    if not _match(r"^[0-9]+\.[0-9]+$", version):
        out.append("cuda_toolkit_version is '%s': it must be \"major.minor\" as a quoted string, e.g. "
                   "cuda_toolkit_version: \"13.0\" (package cuda-toolkit-13-0)." % version)
    nccl = v["cuda_toolkit_nccl_version"]
    if len(nccl) != 0 and not _match(r"^[0-9][0-9.]*-[0-9A-Za-z.+~]+$", nccl):
        out.append("cuda_toolkit_nccl_version is '%s': use a full Debian version such as \"2.28.3-1+cuda%s\", or \"\" "
                   "for the newest." % (nccl, version))
    return out


def sglang_build_rules(v):
    """roles/sglang_build: the former layout's variables, unusable paths and settings, requirement lists."""
    out = []
    build_dir = v["sglang_build_dir"]
    former = [name for name in SGLANG_BUILD_FORMER_VARIABLES if name in v]
    if former:
        out.append("%s no longer exist(s): builds live under sglang_build_dir (%s/builds/<commit>, served through "
                   "%s/current), dependencies follow sglang_build_dependency_drift and sglang_build_torch_install, and "
                   "the import check follows sglang_build_verify_modules (an empty list turns it off). Remove the old "
                   "variables from group_vars/host_vars (roles/sglang_build/README.md, \"Variables\")."
                   % (former, build_dir, build_dir))
    url, ref, python = v["sglang_build_git_url"], v["sglang_build_ref"], v["sglang_build_python"]
    state_file, known_good = v["sglang_build_state_file"], v["sglang_build_known_good_file"]
    keep = v["sglang_build_keep_builds"]
    usable = (
        len(str(url).strip()) > 0
        and len(str(ref).strip()) > 0
        and re.search(r"\s", str(ref)) is None
        and _match("/", build_dir)
        and len(re.sub("/+$", "", str(build_dir))) > 1
        and _match("/", python)
        and _match("/", state_file)
        and _match("/", known_good)
        and (not v["sglang_build_venv_create"] or os.path.basename(os.path.dirname(str(python))) == "bin")
        and as_int(keep) >= 1
    )
    if not usable:
        out.append(
            "Bad sglang_build settings: sglang_build_git_url=%s and sglang_build_ref=%s must be non-empty (ref without "
            "spaces); sglang_build_dir=%s, sglang_build_python=%s, sglang_build_state_file=%s and "
            "sglang_build_known_good_file=%s must be absolute paths (the build directory not /); with "
            "sglang_build_venv_create=true, sglang_build_python must be VENV/bin/python (got %s); "
            "sglang_build_keep_builds=%s must be at least 1. Fix them in group_vars/host_vars."
            % (url, ref, build_dir, python, state_file, known_good, python, keep))
    extra, tools, torch = (v["sglang_build_extra_pip_packages"], v["sglang_build_tool_requirements"],
                           v["sglang_build_torch_packages"])
    requirements = list(extra) + list(tools)
    if (any(not isinstance(item, str) for item in requirements)
            or any(re.match(r"\s*-", item) for item in requirements if isinstance(item, str))
            or not any(isinstance(item, str) for item in torch)):
        out.append("sglang_build_extra_pip_packages=%s and sglang_build_tool_requirements=%s must list requirement "
                   "strings such as \"sgl-kernel==0.3.21\" (pip options belong in sglang_build_pip_args), and "
                   "sglang_build_torch_packages= %s must name at least one package (torch)." % (extra, tools, torch))
    return out


def sglang_sm120_patch_rules(v):
    """roles/sglang_sm120_patch: the target directory and the patch list's names and files."""
    target, patches = v["sglang_sm120_patch_target_dir"], v["sglang_sm120_patch_patches"]
    names, files = _names(patches, "name"), _names(patches, "file")
    if (isinstance(target, str) and _match("/", target) and len(set(map(str, names))) == len(patches)
            and not any(_match("/", name) for name in files)):
        return []
    return ["sglang_sm120_patch_target_dir must be an absolute path (got %s), and every entry of "
            "sglang_sm120_patch_patches needs a unique name and a file relative to that directory (names: %s, files: "
            "%s). Fix them in group_vars or host_vars." % (target, names, files)]


def sglang_service_rules(v):
    """roles/sglang_service: names, directories and paths written into the unit."""
    user, group, groups = v["sglang_service_user"], v["sglang_service_group"], v["sglang_service_supplementary_groups"]
    state_dir, cache_dir = v["sglang_service_state_directory"], v["sglang_service_cache_directory"]
    marker, launcher = v["sglang_service_restart_marker"], v["sglang_service_launcher"]
    credential_dir, modprobe = v["sglang_service_credential_dir"], v["sglang_service_nvidia_modprobe"]
    rw_paths, devices = v["sglang_service_read_write_paths"], v["sglang_service_device_allow"]
    families = v["sglang_service_address_families"]
    good = (
        _match(_NAME, user)
        and _match(_NAME, group)
        and all(_match(_NAME, name) for name in groups)
        and _match(_DIRECTORY_NAME, state_dir) and state_dir not in (".", "..")
        and _match(_DIRECTORY_NAME, cache_dir) and cache_dir not in (".", "..")
        and (len(marker) == 0 or _match(_NO_SPACE_PATH, marker))
        and _match(_PLAIN_PATH, launcher)
        and _match(_PLAIN_PATH, credential_dir)
        and (len(modprobe) == 0 or _match(_PLAIN_PATH, modprobe))
        and all(_match(_NO_SPACE_PATH, path) for path in rw_paths)
        and all(_match(_DEVICE, device) for device in devices)
        and all(_match(_ADDRESS_FAMILY, family) for family in families)
    )
    if good:
        return []
    return [
        "Bad sglang_service settings on %s (nothing was changed): sglang_service_user=%s, sglang_service_group=%s and "
        "sglang_service_supplementary_groups=%s must be user/group names (lower case, digits, _ and -); "
        "sglang_service_state_directory=%s and sglang_service_cache_directory=%s are single directory names (systemd "
        "creates them under /var/lib and /var/cache); sglang_service_restart_marker=%s, sglang_service_launcher=%s, "
        "sglang_service_credential_dir=%s, sglang_service_nvidia_modprobe=%s and sglang_service_read_write_paths= %s "
        "must be absolute paths without spaces; sglang_service_device_allow= %s entries look like \"char-nvidia-uvm "
        "rw\" or \"/dev/nvidia0 rw\"; sglang_service_address_families=%s are AF_* names. Fix them in "
        "group_vars/host_vars."
        % (v["inventory_hostname"], user, group, groups, state_dir, cache_dir, marker, launcher, credential_dir,
           modprobe, rw_paths, devices, families)]


# Roles without an entry here have their argument spec only.
RULES = {
    "nvidia_driver": nvidia_driver_rules,
    "cuda_toolkit": cuda_toolkit_rules,
    "sglang_build": sglang_build_rules,
    "sglang_sm120_patch": sglang_sm120_patch_rules,
    "sglang_service": sglang_service_rules,
}


def entry_options(argument_specs, entry="main"):
    """The options of ENTRY in a role's meta/argument_specs.yml data (its `argument_specs` mapping or the file)."""
    specs = argument_specs.get("argument_specs", argument_specs) if isinstance(argument_specs, dict) else {}
    return dict((specs.get(entry) or {}).get("options") or {})


def spec_errors(options, values):
    """ansible-core's own role argument validation (the messages of 'Validating arguments against arg spec')."""
    result = ArgumentSpecValidator(options).validate(values, validate_role_argument_spec=True)
    return list(result.error_messages)


def check_role(role, options, values):
    """Every problem of ROLE's VALUES (templated variables): spec errors first; the role's rules when the spec passed
    (a rule expects the types the spec guarantees)."""
    errors = spec_errors(options, {name: values[name] for name in options if name in values})
    if errors:
        return ["Validation of arguments failed: " + error for error in errors]
    rules = RULES.get(role)
    if rules is None:
        return []
    return rules(values)


def format_report(problems):
    """One message for every problem of every role: {role: [message, ...]} in the order checked."""
    lines = ["%s: %s" % (role, message) for role, messages in problems.items() for message in messages]
    count = len(lines)
    return ("%d problem%s in the roles' variables (nothing was changed; fix them in group_vars/host_vars or -e):\n%s"
            % (count, "" if count == 1 else "s", "\n".join("- " + line for line in lines)))
