# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decisions of the nvidia_driver role, as pure functions (issue 20, docs in /work/notes/issue-20-plan.md).

- the package set: which entry of the package data, the packages to ask apt for, the pinning package
  installed first, the stacks to leave (ports of refuse.yml:21-23 and packages.yml:10-42);
- `fast_keep`: whether the installed packages already are the requested driver, decided from dpkg's
  status alone. It answers keep only when every condition holds under which apt_transaction's keeping
  plan (packages.yml:77-105) would install and remove nothing; otherwise it says why and the role
  plans with apt as today;
- `reboot_reasons` (kernel.yml:4-14), `secure_boot_on` and `is_control_node` (facts.yml:40-53);
- `judge`: the verification checks of verify.yml:51-138, with the same words.
- the refusals that need the host (refuse.yml before issue 20: GPU generation against the flavour, Secure Boot
  without a usable MOK) and repository.yml's keyring decision (`gpg --with-colons` parsed) and duplicate sources.

No I/O here: module_utils/nvidia_driver_state.py reads the host.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time

from ansible_collections.gpufleet.llm_server.plugins.module_utils import apt_transaction as at
from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs

PLAN_WITH_APT = "plan with apt"


class RulesError(Exception):
    """The inputs name something the package data does not have."""


# -- the package set -------------------------------------------------------------------------------
def select_entry(data, source, distribution, branch):
    """data[source][distribution][branch], or RulesError with refuse.yml's words."""
    distributions = data.get(source) or {}
    if distribution not in distributions:
        hint = (" Ubuntu's archive exists on Ubuntu only: on Debian use nvidia_driver_source: nvidia."
                if source == "ubuntu" else "")
        raise RulesError("nvidia_driver_source '%s' has no packages for nvidia_driver_distribution '%s' (known: %s).%s "
                         "Nothing was changed." % (source, distribution, ", ".join(distributions), hint))
    branches = distributions[distribution] or {}
    if str(branch) not in branches:
        raise RulesError(
            'nvidia_driver_branch "%s" is not in the package data of source \'%s\' on %s (known branches: %s). Choose '
            "one of them, or describe the branch in nvidia_driver_package_data_overrides (see the role README). "
            "Nothing was changed." % (branch, source, distribution, ", ".join(branches)))
    return branches[str(branch)]


def check_entry(entry, source, distribution, branch, flavor, profile, kernel_modules):
    """RulesError (the words of the role's former refuse_data.yml) when the entry cannot serve the request: no
    package set for the flavour and profile, no precompiled modules where they are asked for, or no lock,
    pinning package or stack."""
    lock = entry.get("lock") or ""
    packages = ((entry.get("packages") or {}).get(flavor) or {}).get(profile) or []
    precompiled = (entry.get("precompiled") or {}).get(flavor) or []
    if (lock in ("hold", "pin") and (lock != "pin" or entry.get("pin_package")) and packages
            and (kernel_modules == "dkms" or precompiled) and entry.get("stack")):
        return
    precompiled_hint = (" with precompiled modules (nvidia_driver_kernel_modules: precompiled needs nvidia_driver_source:"
                        " ubuntu: only Canonical builds signed linux-modules-nvidia-* packages)"
                        if kernel_modules == "precompiled" else "")
    raise RulesError(
        "The package data of source '%s', %s, branch %s has no %s/%s package set%s, or its entry lacks "
        "lock/pin_package/stack. Change nvidia_driver_flavor, nvidia_driver_profile or nvidia_driver_kernel_modules, "
        "or fix the entry in nvidia_driver_package_data_overrides. Nothing was changed."
        % (source, distribution, branch, flavor, profile, precompiled_hint))


def kernel_flavor_found(kernel_flavor, kernel_release, distribution_version, installed):
    """packages.yml:12-16: explicit flavour, else '<base>-hwe-<release>' when its kernel image is installed, else base."""
    if kernel_flavor:
        return kernel_flavor
    base = (kernel_release or "").split("-")[-1]
    hwe = "%s-hwe-%s" % (base, distribution_version or "")
    return hwe if ("linux-image-" + hwe) in installed else base


def wanted_packages(entry, flavor, profile, kernel_modules, kernel_flavor):
    """packages.yml:39-42: the names asked of apt."""
    names = entry["precompiled"][flavor] if kernel_modules == "precompiled" else entry["packages"][flavor][profile]
    return [name.replace("{kernel_flavor}", kernel_flavor) for name in names]


def install_first(entry, version, prefix="nvidia-driver-pinning-"):
    """packages.yml:17-20: the pinning package of the pin lock (per version when nvidia_driver_version is set)."""
    if entry.get("lock") != "pin":
        return []
    return [prefix + strip_revision(version)] if version else [entry["pin_package"]]


def leave_patterns(data, distribution):
    """packages.yml:23-26: every driver stack of this distribution, both sources, in first-seen order."""
    patterns = []
    for distributions in data.values():
        for entry in ((distributions or {}).get(distribution) or {}).values():
            for pattern in entry.get("stack", []):
                if pattern not in patterns:
                    patterns.append(pattern)
    return patterns


def stack_re(entry):
    """packages.yml:27-28: the branch's stack patterns as one anchored regular expression."""
    return "^(" + "|".join(re.escape(p).replace(r"\*", ".*") for p in entry["stack"]) + ")$"


def strip_revision(version):
    """regex_replace('-[^-]*$', ''): '595.71.05-1ubuntu1' -> '595.71.05'; '580.173.02' unchanged."""
    return re.sub(r"-[^-]*$", "", version or "")


def _on_request(driver_version, branch, version):
    return (driver_version.split(".")[0] == str(branch)
            and (not version or driver_version == strip_revision(version)))


# -- the fast keep ---------------------------------------------------------------------------------
def _normalized_preference(content):
    # apt_transaction writes each planned preference as content.rstrip("\n") + "\n" (its overlay).
    return None if not content else content.rstrip("\n") + "\n"


def fast_keep(packages, wanted, first, leave, version_from, branch, version, upgrade, hold_lock, entry_stack_re,
              planned_preferences, preferences_on_disk, index_signature=None, agreed_index_signature=None):
    """Decide keep from dpkg's status alone.

    packages: host_state.parse_dpkg_status_file(); wanted / first: wanted_packages() / install_first();
    leave: leave_patterns(); planned_preferences: {basename: content or '' (absent)} as packages.yml:57-62
    passes them to apt; preferences_on_disk: {basename: bytes or None}.
    index_signature / agreed_index_signature (optional): host_state.apt_lists_signature() now and when
    an apt plan last agreed with this keep; they guard the one thing dpkg cannot know (below).

    Returns {keep, reasons, installed_keep, installed_reasons, mixed, packages, driver_version, holds_missing,
    holds_extra}. installed_keep: the installed packages are the requested driver, one version (mixed: {} or
    at.mixed_stack's groups), and nvidia_driver_upgrade is false - the role then changes no driver package,
    with or without apt. keep is True only
    when all of these hold (plan section "Fast keep without apt"); each failure is a reason:
      - upgrade is false (an upgrade needs the candidates: apt);
      - no package is half-installed (apt would finish configuring it);
      - every install_first and install package is installed;
      - the wanted packages whose version is a driver version are on the branch and the pin, and so is
        the highest driver version of the stack apt_transaction would report;
      - the installed stack is one driver version (at.mixed_stack);
      - the preference files on disk equal the planned ones (apt resolves with the planned ones);
      - every installed package matching `leave` is in the Depends/Pre-Depends/Provides closure of the
        wanted packages (apt_transaction removes the others: apt_transaction.py plan(), `remove`).
    What dpkg cannot know: apt's closure follows the candidate versions' relations, this one the
    installed versions'. When the repository publishes a version with other relations (Ubuntu's 590 ->
    595 transition did), apt may remove what this closure keeps. Passing both index signatures turns
    that into one more condition; without them the caller must run the apt plan at least when the
    indexes change (the debug switch, section 5, compares both).
    """
    reasons = []
    installed, held = hs.installed_and_held(packages)
    if upgrade:
        reasons.append("nvidia_driver_upgrade is true (an upgrade needs apt's candidates)")
    half = hs.unsettled(packages)
    if half:
        reasons.append("dpkg left %s half-way (%s)" % (", ".join(half), ", ".join(
            "%s %s" % (packages[name]["state"], packages[name]["flag"]) for name in half)))
    missing = [name for name in list(first) + list(wanted) if name not in installed]
    if missing:
        reasons.append("not installed: %s" % ", ".join(missing))

    closure = hs.dependency_closure(packages, list(first) + list(wanted))
    stack = {name: installed[name] for name in sorted(closure)
             if name in installed and (re.search(version_from, name) or name in wanted or name in first)}
    driver_version = at.driver_version(stack, version_from)

    off_request = []
    for name in wanted:
        if name in installed and re.search(version_from, name):
            key = at.driver_version_key(installed[name])
            if key is None or not _on_request(at.upstream(installed[name]), branch, version):
                off_request.append("%s %s" % (name, installed[name]))
    if off_request:
        pinned = (" version %s" % version) if version else ""
        reasons.append("not on branch %s%s: %s" % (branch, pinned, ", ".join(off_request)))
    if not missing and not _on_request(driver_version, branch, version):
        reasons.append("the installed stack is driver %s, not branch %s%s" % (
            driver_version or "(none)", branch, (" version %s" % version) if version else ""))
    mixed = at.mixed_stack(stack)
    if mixed:
        reasons.append("the installed driver stack is not one version: %s" % at.describe_mixed(mixed))
    # Everything above is about the installed packages alone: without these reasons, nvidia_driver_upgrade false keeps
    # them (packages_apt.yml), whatever the repositories publish. The ones below only decide whether apt is needed.
    installed_reasons = list(reasons)

    for name, content in sorted(planned_preferences.items()):
        on_disk = preferences_on_disk.get(name)
        on_disk = on_disk.decode("utf-8", "replace") if isinstance(on_disk, bytes) else on_disk
        if _normalized_preference(content) != _normalized_preference(on_disk):
            reasons.append("apt preference file %s differs from the planned one" % name)

    removable = [name for name in at.expand_patterns(leave, installed) if name not in closure]
    if removable:
        reasons.append("installed but not needed by the wanted packages (apt would remove them): %s"
                       % ", ".join(removable))

    if agreed_index_signature is not None and index_signature != agreed_index_signature:
        reasons.append("the apt indexes changed since an apt plan last agreed")

    hold_names = [name for name in stack if re.search(entry_stack_re, name) and not name.startswith("linux-modules-nvidia-")]
    return {
        "keep": not reasons,
        "reasons": reasons,
        "installed_keep": not installed_reasons,
        "installed_reasons": installed_reasons,
        "mixed": mixed,
        "packages": [{"name": name, "version": stack[name]} for name in sorted(stack)],
        "driver_version": driver_version,
        "holds_missing": sorted(set(hold_names) - held) if hold_lock else [],
        "holds_extra": [] if hold_lock else sorted(set(stack) & held),
    }


# -- the keep record (the stored judgement of apt) ---------------------------------------------------
# The fast keep decides from dpkg alone; what dpkg cannot know is how apt would resolve the same request against
# the current indexes and preferences (the candidates' relations, see fast_keep). The role therefore stores, after a
# real apt run whose result the fast keep reproduces, the request, the index signature and the stack apt left; the
# fast path is taken only while all of them are unchanged. A cache of apt's judgement, not configuration.
KEEP_RECORD_FORMAT = 1


def index_signature(lists_entries, apt_files):
    """One digest of what apt resolves with: the index files (host_state.lists_entries: name, size, mtime_ns) and
    the apt configuration that selects and ranks them (apt_files: {path: bytes or None}, the sources and preference
    files). Any `apt-get update` that fetched something, any source or pin change, changes it."""
    digest = hashlib.sha256(hs.apt_lists_signature(lists_entries).encode("ascii"))
    for path in sorted(apt_files):
        content = apt_files[path]
        digest.update(("\0%s\0%s\0" % (path, "-" if content is None else len(content))).encode("utf-8"))
        digest.update(content or b"")
    return digest.hexdigest()


def keep_request(source, distribution, branch, version, flavor, profile, kernel_modules, wanted, first, leave,
                 version_from):
    """What the role asked apt for: every input of apt_transaction's plan other than the host's own state."""
    return {"source": source, "distribution": distribution, "branch": str(branch), "version": version or "",
            "flavor": flavor, "profile": profile, "kernel_modules": kernel_modules, "wanted": list(wanted),
            "install_first": list(first), "leave": list(leave), "version_from": version_from}


def keep_record(request, signature, packages, driver_version):
    """The JSON document the apt path stores (no secrets: package names, versions, a digest)."""
    return {"format": KEEP_RECORD_FORMAT, "request": request, "index_signature": signature,
            "packages": [{"name": p["name"], "version": p["version"]} for p in packages],
            "driver_version": driver_version}


def parse_keep_record(text):
    """The stored record, or None when absent, unreadable or of another format (then apt plans)."""
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("format") != KEEP_RECORD_FORMAT:
        return None
    return record


def keep_record_reasons(stored, request, signature, packages, driver_version):
    """Why the stored record does not vouch for this run's fast keep ([] when it does)."""
    if stored is None:
        return ["no stored apt judgement for this host (first run, or the last apt run did not agree with dpkg)"]
    reasons = []
    old = stored.get("request") or {}
    changed = sorted(key for key in set(old) | set(request) if old.get(key) != request.get(key))
    if changed:
        reasons.append("the request changed since apt last agreed (%s)" % ", ".join(changed))
    if stored.get("index_signature") != signature:
        reasons.append("the apt indexes, sources or preferences changed since apt last agreed")
    stack = [{"name": p["name"], "version": p["version"]} for p in packages]
    if stored.get("packages") != stack or stored.get("driver_version") != driver_version:
        reasons.append("the installed driver stack is not the one apt left")
    return reasons


def recordable_reasons(keep, apt_packages, apt_driver_version):
    """After a real apt run: the record may be stored only when the fast keep, read from dpkg now, keeps exactly
    what apt reports it left. Otherwise ([] is the agreeing case) the record is removed and apt plans every run."""
    reasons = ["the fast keep would not keep: " + "; ".join(keep["reasons"])] if keep["reasons"] else []
    apt_stack = [{"name": p["name"], "version": p["version"]} for p in apt_packages]
    if keep["packages"] != apt_stack:
        reasons.append("dpkg's closure gives the stack %s, apt left %s" % (
            " ".join("%s=%s" % (p["name"], p["version"]) for p in keep["packages"]) or "(none)",
            " ".join("%s=%s" % (p["name"], p["version"]) for p in apt_stack) or "(none)"))
    if keep["driver_version"] != apt_driver_version:
        reasons.append("dpkg gives driver %s, apt %s" % (keep["driver_version"] or "(none)", apt_driver_version or "(none)"))
    return reasons


def fast_path(keep, record_reasons, upgrade, packages_unknowable):
    """The role's decision: skip apt only when every condition holds."""
    return bool(keep["keep"]) and not record_reasons and not upgrade and not packages_unknowable


# -- host facts ------------------------------------------------------------------------------------
def mixed_stack_refusal(hostname, mixed, branch, version):
    """The refusal of a stack that is already more than one driver version (nvidia_driver_upgrade false)."""
    target = ("nvidia_driver_version %s" % version) if version else "the newest branch %s build the repositories offer" % branch
    return ("The NVIDIA driver stack installed on %s is not one driver version: %s. Kept as it is, user space and kernel "
            "module would not match after the next reboot. Nothing was changed (no package installed, removed or "
            "held, no file written). Fix: run once with nvidia_driver_upgrade: true - the role then moves the whole stack "
            "to %s in one apt transaction, or changes nothing - or put every package back to one version yourself "
            "(apt-get install --allow-change-held-packages NAME=VERSION ...)." % (
                hostname, at.describe_mixed(mixed), target))


def reboot_reasons(gpu_info, installed_version, flavor, options_changed):
    """kernel.yml:4-14, same words."""
    loaded = bool((gpu_info.get("modules_loaded") or {}).get("nvidia"))
    loaded_version = gpu_info.get("driver_version") or ""
    module_flavor = gpu_info.get("module_flavor") or ""
    reasons = [] if loaded else ["the nvidia module is not loaded"]
    if loaded_version and installed_version and loaded_version != installed_version:
        reasons.append("the loaded driver is %s, the installed one %s" % (loaded_version, installed_version))
    if module_flavor and loaded and module_flavor != flavor:
        reasons.append("the loaded module is %s, nvidia_driver_flavor is %s" % (module_flavor, flavor))
    if options_changed:
        reasons.append("the kernel module options changed")
    return reasons


def secure_boot_on(setting, efivar):
    """facts.yml:42-45: 'enabled', or 'auto' and the SecureBoot EFI variable's base64 ends in 'AAE='
    (4 attribute bytes + data byte 1). efivar: the variable's bytes or None."""
    if setting == "enabled":
        return True
    if setting != "auto" or not efivar:
        return False
    return re.match(r".*AAE=\s*$", base64.b64encode(efivar).decode("ascii")) is not None


LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def is_control_node(connection, inventory_hostname, ansible_host, target_machine_id, controller_machine_id):
    """facts.yml:46-52: a local connection, a loopback name, or the same non-empty machine id."""
    target = (target_machine_id or "").strip()
    return ((connection or "ssh") == "local" or inventory_hostname in LOCAL_NAMES
            or (ansible_host or inventory_hostname) in LOCAL_NAMES
            or (len(target) > 0 and target == (controller_machine_id or "").strip()))


# -- refusals that need the host's state (refuse.yml before issue 20, same words) ---------------------
def _version_at_least(text, floor):
    numbers = [int(part) for part in re.findall(r"\d+", str(text))]
    return tuple(numbers or [0]) >= floor


def gpu_generations(gpus):
    """The generation rule (docs/nvidia-driver.md): compute capability when the driver reports it, else the PCI
    device id (every Turing-or-newer GPU from 0x1e00, every Blackwell-or-newer from 0x2900)."""
    generations = []
    for gpu in gpus:
        capability = gpu.get("compute_capability")
        if capability is not None and capability != "":
            blackwell, turing = _version_at_least(capability, (10, 0)), _version_at_least(capability, (7, 5))
        else:
            device = int(str(gpu.get("device_id") or "0"), 16)
            blackwell, turing = device >= 0x2900, device >= 0x1e00
        generations.append({"address": gpu.get("address"), "device_id": gpu.get("device_id"),
                            "compute_capability": capability, "blackwell_or_newer": blackwell,
                            "turing_or_newer": turing})
    return generations


def module_refusals(gpu_info, flavor, allow_proprietary, hostname):
    """The three flavour-versus-generation refusals, in refuse.yml's order and words."""
    gpus = [device for device in (gpu_info or {}).get("devices") or [] if device.get("kind") == "gpu"]
    generations = gpu_generations(gpus)
    refusals = []
    blackwell = [gen["address"] for gen in generations if gen["blackwell_or_newer"]]
    diagnosis = [item.get("message") for item in (gpu_info or {}).get("diagnosis") or []
                 if item.get("code") == "open_module_required"]
    if flavor != "open" and (blackwell or diagnosis):
        refusals.append(
            "nvidia_driver_flavor is 'proprietary' but %s has GPU(s) that only run with NVIDIA's open kernel module: %s. "
            "The proprietary module loads, then logs \"requires use of the NVIDIA open kernel modules\" and nvidia-smi "
            "finds no devices. Set nvidia_driver_flavor: open." % (hostname, "; ".join(blackwell + diagnosis)))
    turing = [gen["address"] for gen in generations if gen["turing_or_newer"]]
    if flavor != "open" and not allow_proprietary and turing:
        refusals.append(
            "nvidia_driver_flavor is 'proprietary' but GPU(s) %s are Turing or newer, where NVIDIA's open kernel module is "
            "the supported path. Set nvidia_driver_flavor: open, or set nvidia_driver_allow_proprietary: true to keep the "
            "proprietary module on these (pre-Blackwell) GPUs." % ", ".join(turing))
    old = [gen["address"] for gen in generations if not gen["turing_or_newer"]]
    if flavor != "proprietary" and old:
        refusals.append(
            "nvidia_driver_flavor is 'open' but GPU(s) %s are older than Turing, which the open kernel module does not "
            "support (and branch 590 dropped entirely). Use nvidia_driver_flavor: proprietary with nvidia_driver_branch "
            "\"580\" or older." % ", ".join(old))
    return refusals


def secure_boot_refusal(secure_boot_on_, setting, kernel_modules, mok_key, mok_certificate):
    """Secure Boot on, DKMS modules and no MOK pair: the refusal (refuse.yml's words), else ''."""
    if not secure_boot_on_ or kernel_modules == "precompiled" or (mok_key and mok_certificate):
        return ""
    return (
        "Secure Boot is on (%s) and nvidia_driver_mok_key / nvidia_driver_mok_certificate are not set, so the kernel would "
        "refuse the DKMS-built nvidia modules. Nothing was installed. Either: (1) create a key pair on the host (openssl "
        "req -new -x509 -newkey rsa:2048 -nodes -days 36500 -subj \"/CN=nvidia DKMS MOK/\" -outform DER -keyout "
        "/var/lib/dkms/mok.key -out /var/lib/dkms/mok.der), enrol it (mokutil --import /var/lib/dkms/mok.der, reboot, "
        "confirm in MOK Manager), then set nvidia_driver_mok_key: /var/lib/dkms/mok.key and nvidia_driver_mok_certificate: "
        "/var/lib/dkms/mok.der; or (2) on Ubuntu, use Canonical's signed modules (nvidia_driver_source: ubuntu, "
        "nvidia_driver_kernel_modules: precompiled), which need no MOK; or (3) disable Secure Boot in the firmware setup."
        % ("nvidia_driver_secure_boot: enabled" if setting == "enabled" else "read from the EFI variable SecureBoot"))


def mok_refusals(missing, certificate, mokutil_stdout):
    """The MOK files must exist and the certificate be enrolled (refuse.yml's words). missing: the MOK paths that
    do not exist; mokutil_stdout: `mokutil --test-key CERT` output, or None when it was not asked."""
    if missing:
        return ["Secure Boot is on and nvidia_driver_mok_key / nvidia_driver_mok_certificate name files missing on the "
                "host: %s. Create and enrol the key pair first (see docs/nvidia-driver.md \"Secure Boot\")."
                % ", ".join(missing)]
    if mokutil_stdout and "is not enrolled" in mokutil_stdout:
        return ["mokutil says %s is not enrolled, so modules DKMS signs with it would not load under Secure Boot. Nothing "
                "was installed. Run `mokutil --import %s`, reboot, confirm \"Enroll MOK\" in MOK Manager, then run the "
                "role again." % (certificate, certificate)]
    return []


# -- the repository keyring (repository.yml's shell read, issue 19: its awk parser moved here) -------
def parse_gpg_colons(text, now, min_validity_days):
    """`gpg --show-keys --with-colons` output -> one {fingerprint, state, expires} per primary key, as
    repository.yml's awk did: the `fpr` record right after a `pub` record is that key's fingerprint; state is
    revoked (validity r), expired (validity e, or expiry <= now), expiring (expiry within min_validity_days) or
    lasting. expires: epoch seconds as text, or '' for a key that does not expire."""
    until = now + int(min_validity_days) * 86400
    keys = []
    pub = None
    for line in (text or "").splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            pub = (fields[1] if len(fields) > 1 else "", fields[6] if len(fields) > 6 else "")
            continue
        if fields[0] == "fpr" and pub is not None and len(fields) > 9:
            validity, expires = pub
            state = "lasting"
            if validity == "r":
                state = "revoked"
            elif validity == "e" or (expires != "" and int(expires) <= now):
                state = "expired"
            elif expires != "" and int(expires) <= until:
                state = "expiring"
            keys.append({"fingerprint": fields[9], "state": state, "expires": expires})
        pub = None
    return keys


def normalized_fingerprints(fingerprints):
    """nvidia_driver_repo_key_fingerprints as compared: upper case, without spaces."""
    return [str(fpr).upper().replace(" ", "") for fpr in fingerprints or []]


def keyring_download_reason(keyring, gpg_found, gpg_rc, file_description, keys, fingerprints, min_validity_days):
    """Why the repository key must be downloaded, '' when the installed keyring will do (repository.yml's
    "Decide whether the repository key must be downloaded", same words). file_description: stat's
    `%F:%a:%U:%G` of the keyring ('regular file:644:root:root'), or 'absent'."""
    if not gpg_found:
        return "gpg is not installed (it reads the keyring and checks a downloaded key)"
    if gpg_rc != 0:
        return "%s is missing or not an OpenPGP keyring gpg can read" % keyring
    if file_description != "regular file:644:root:root":
        return "%s is a %s, not a regular file, mode 644, owned by root:root" % (keyring, file_description)
    wanted = normalized_fingerprints(fingerprints)
    accepted = [key for key in keys if key["fingerprint"] in wanted]
    if not accepted:
        return "%s has no key with a fingerprint in nvidia_driver_repo_key_fingerprints" % keyring
    if not any(key["state"] == "lasting" for key in accepted):
        first = accepted[0]
        expiry = ""
        if first["expires"]:
            expiry = " (expiry %s)" % time.strftime("%Y-%m-%d", time.gmtime(int(first["expires"])))
        return "%s: key %s is %s%s, nvidia_driver_repo_key_min_validity_days is %s" % (
            keyring, first["fingerprint"], first["state"], expiry, min_validity_days)
    return ""


def stat_description(state):
    """GNU stat's `%F:%a:%U:%G` for a host_state.file_state() result (what repository.yml compared)."""
    if not state["exists"]:
        return "absent"
    kinds = {"file": "regular file" if state.get("content") else "regular empty file", "directory": "directory",
             "link": "symbolic link"}
    return "%s:%s:%s:%s" % (kinds.get(state["kind"], "other file"), state["mode"].lstrip("0") or "0",
                            state["owner"], state["group"])


def duplicate_sources(listing, url, own_name):
    """repository.yml's duplicate-source refusal: listing is [(name, bytes or None)] of /etc/apt/sources.list.d;
    the names (*.list, *.sources, not hidden, not own_name) whose content contains url."""
    found = []
    for name, content in listing:
        if name == own_name or name.startswith(".") or not (name.endswith(".list") or name.endswith(".sources")):
            continue
        if content is not None and url and url.encode("utf-8") in content:
            found.append(name)
    return sorted(found)


def duplicate_source_message(paths, url, sources_file):
    """The words of repository.yml's "Fail on a duplicate source"."""
    return ("%s already point(s) apt at %s (e.g. from NVIDIA's cuda-keyring package); apt refuses two sources for one "
            "repository with different Signed-By keyrings. Remove that file (and the cuda-keyring package), then run "
            "again: this role manages %s." % (", ".join(paths), url, sources_file))


# -- verification ----------------------------------------------------------------------------------
SMI_GPU_LINE = re.compile(r"^\s*[0-9A-Fa-f]+:")


def judge(gpu_info, flavor, branch, version, expected_gpu_count, smi, installed="", installed_from=""):
    """verify.yml:51-138: every check as {check, status: pass|fail|not_checked, detail, fix}.

    smi: {rc, stdout, msg} of `nvidia-smi --query-gpu=pci.bus_id,name,driver_version --format=csv,noheader`;
    installed / installed_from: the installed driver version and where it was read ('' when unknown).
    """
    branch = str(branch)
    loaded = bool((gpu_info.get("modules_loaded") or {}).get("nvidia")) and gpu_info.get("driver_version") is not None
    loaded_version = gpu_info.get("driver_version") or ""
    loaded_branch = loaded_version.split(".")[0]
    module_flavor = gpu_info.get("module_flavor")
    diagnosis = " ".join(d.get("message", "") for d in gpu_info.get("diagnosis") or [])
    expected_set = int(expected_gpu_count or 0)
    expected = expected_set if expected_set > 0 else len(
        [d for d in gpu_info.get("devices") or [] if d.get("kind") == "gpu" and d.get("driver") != "vfio-pci"])
    smi_rc = smi.get("rc", 1) if smi.get("rc") is not None else 1
    smi_lines = [line for line in (smi.get("stdout") or "").splitlines() if SMI_GPU_LINE.match(line)]
    open_required = [d.get("message", "") for d in gpu_info.get("diagnosis") or [] if d.get("code") == "open_module_required"]
    log_source = gpu_info.get("kernel_log_source")
    checks = []

    checks.append({
        "check": "module_loaded",
        "status": "pass" if loaded else "fail",
        "detail": ("nvidia %s (%s) is loaded" % (loaded_version, module_flavor or "unknown flavour")) if loaded
        else "the nvidia kernel module is not loaded (no /proc/driver/nvidia/version)",
        "fix": "" if loaded else ("Reboot the host (or run `modprobe nvidia`) and read the kernel log "
                                  "(dmesg | grep -i NVRM). " + diagnosis).strip(),
    })
    checks.append({
        "check": "open_kernel_module",
        "status": "not_checked" if not loaded else ("pass" if module_flavor == flavor else "fail"),
        "detail": "no module loaded" if not loaded else (
            "/proc/driver/nvidia/version shows the %s kernel module; nvidia_driver_flavor is %s" % (module_flavor or "unknown", flavor)),
        "fix": ("Install the %s flavour (role gpufleet.llm_server.nvidia_driver) and reboot; on Blackwell only the open module works."
                % flavor) if (loaded and module_flavor != flavor) else "",
    })
    branch_off = loaded and loaded_branch != branch
    checks.append({
        "check": "driver_branch",
        "status": "not_checked" if not loaded else ("fail" if branch_off else "pass"),
        "detail": "no module loaded" if not loaded else (
            'loaded driver %s is branch %s; nvidia_driver_branch is "%s"' % (loaded_version, loaded_branch, branch)),
        "fix": ('Driver branch mismatch: the host runs %s (branch %s) but nvidia_driver_branch is "%s". If branch %s was just '
                'installed, reboot into it; otherwise set nvidia_driver_branch: "%s" in the inventory (or install branch %s '
                "with the role)." % (loaded_version, loaded_branch, branch, branch, loaded_branch, branch)) if branch_off else "",
    })
    if not loaded or not installed:
        detail = ("no installed driver package known (nvidia-smi is not from a dpkg package)" if not installed
                  else "no module loaded; installed %s (%s)" % (installed, installed_from))
    else:
        detail = "loaded %s, installed %s (%s)" % (loaded_version, installed, installed_from)
    checks.append({
        "check": "installed_version",
        "status": "not_checked" if (not loaded or not installed) else ("pass" if loaded_version == installed else "fail"),
        "detail": detail,
        "fix": ("The packages install %s but %s is loaded: reboot to load the installed driver (until then NVML reports "
                '"Driver/library version mismatch").' % (installed, loaded_version))
        if (loaded and installed and loaded_version != installed) else "",
    })
    pinned = (version or "").split("-")[0]
    checks.append({
        "check": "driver_version_pin",
        "status": "not_checked" if (not loaded or not version) else ("pass" if loaded_version == pinned else "fail"),
        "detail": "no version pin (nvidia_driver_version is empty)" if not version
        else "loaded %s, pinned %s" % (loaded_version or "nothing", version),
        "fix": ("Reboot into %s or correct nvidia_driver_version." % version)
        if (loaded and version and loaded_version != pinned) else "",
    })
    checks.append({
        "check": "kernel_log",
        "status": "fail" if open_required else ("pass" if log_source else "not_checked"),
        "detail": " ".join(open_required) if open_required else (
            ('no "requires use of the NVIDIA open kernel modules" in the kernel log (%s)' % log_source) if log_source
            else "the kernel log was not readable (dmesg restricted or absent)"),
        "fix": "Set nvidia_driver_flavor: open, run the role, reboot." if open_required else "",
    })
    count_ok = smi_rc == 0 and len(smi_lines) == expected and expected > 0
    smi_said = ("lists %d GPU(s)" % len(smi_lines)) if smi_rc == 0 else "failed (rc %s): %s %s" % (
        smi.get("rc", "n/a") if smi.get("rc") is not None else "n/a", smi.get("stdout") or "", (smi.get("msg") or "").strip())
    checks.append({
        "check": "gpu_count",
        "status": "pass" if count_ok else "fail",
        "detail": "nvidia-smi %s; expected %d (%s); %s NVIDIA GPU(s) on the PCI bus" % (
            smi_said, expected, "nvidia_driver_expected_gpu_count" if expected_set > 0
            else "NVIDIA GPUs on the PCI bus outside vfio-pci", gpu_info.get("pci_gpu_count")),
        "fix": "" if count_ok else (
            "Compare `nvidia-smi -L` with the inventory (llm_server_expected_gpu_count / nvidia_driver_expected_gpu_count); "
            "GPUs on the bus but missing from nvidia-smi usually mean the proprietary module on Blackwell, a GPU on vfio-pci, "
            'or a fallen-off GPU (dmesg | grep -i "NVRM\\|Xid"). ' + diagnosis).strip(),
    })
    return checks


def failed_message(hostname, checks):
    """verify.yml:152-155's fail_msg, or '' when no check failed."""
    failed = [c for c in checks if c["status"] == "fail"]
    if not failed:
        return ""
    return "NVIDIA driver verification failed on %s: %s" % (
        hostname, " ".join("[%s] %s. %s" % (c["check"], c["detail"].strip(), c["fix"].strip()) for c in failed))
