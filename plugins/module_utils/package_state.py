# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which of the packages an `ansible.builtin.apt: state=present` task names are already installed, from dpkg's
status database alone (issue 20: the apt task, which parses every index, then runs only when one is missing).

Pure: `missing_packages` takes the status text. The rule is the one of host_state: when unsure, say "missing";
the apt task then runs and decides exactly as it does without this module. Sure means what ansible.builtin.apt
itself would leave alone (its package_status): the package is in dpkg's state "installed" and, for a
`name=version` request, that exact version (a wildcard version may make apt move to a newer match, so it is
left to apt).

Standard library only.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.host_state import DPKG_STATUS, parse_dpkg_status_file

# A plain request: a Debian package name (Debian Policy 5.6.1), an optional :architecture, an optional =version.
PLAIN_REQUEST = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)(?::(?P<arch>[a-z0-9-]+))?(?:=(?P<version>[^=<>\s]+))?$")
VERSION_PATTERN = re.compile(r"[*?\[]")

__all__ = ["DPKG_STATUS", "parse_request", "missing_packages", "read_status"]


def parse_request(request):
    """'name[:arch][=version]' -> {name, arch, version}; None for anything else (apt's `>=`, globs, paths, URLs,
    unrendered templates such as '{kernel_flavor}'), which only apt can decide."""
    match = PLAIN_REQUEST.match(str(request).strip())
    return match.groupdict() if match else None


def _why_missing(request, packages, native_arch):
    spec = parse_request(request)
    if spec is None:
        return "not a plain package name (name[:arch][=version]); apt decides"
    package = packages.get(spec["name"])
    if package is None:
        return "not known to dpkg (not installed, or a virtual package name; apt decides)"
    status = " ".join(part for part in (package["want"], package["flag"], package["state"]) if part)
    if package["state"] != "installed" or package["flag"] != "ok":
        return "dpkg status is '%s'" % status
    arch = package["arch"]
    if spec["arch"] and arch != spec["arch"]:
        return "installed for architecture %s, %s requested" % (arch or "unknown", spec["arch"])
    # A bare name is the native architecture's package for apt; dpkg's own package is always native.
    if not spec["arch"] and native_arch and arch not in (native_arch, "all"):
        return "installed for architecture %s only, not the native %s" % (arch or "unknown", native_arch)
    if spec["version"]:
        if VERSION_PATTERN.search(spec["version"]):
            return "version pattern %s (apt may pick a newer match than the installed %s); apt decides" % (
                spec["version"], package["version"])
        if package["version"] != spec["version"]:
            return "version %s installed, %s requested" % (package["version"], spec["version"])
    return None


def missing_packages(requests, status_text):
    """(missing [request...], installed {request: version}, reasons {request: why}) for the requests in order.

    status_text None (dpkg's database unreadable) makes every request missing.
    """
    missing, installed, reasons = [], {}, {}
    packages = parse_dpkg_status_file(status_text) if status_text is not None else None
    native_arch = (packages or {}).get("dpkg", {}).get("arch", "")
    for request in requests:
        request = str(request)
        if request in installed or request in reasons:
            continue
        why = ("cannot read dpkg's status database" if packages is None
               else _why_missing(request, packages, native_arch))
        if why is None:
            installed[request] = packages[parse_request(request)["name"]]["version"]
        else:
            missing.append(request)
            reasons[request] = why
    return missing, installed, reasons


def read_status(path=DPKG_STATUS):
    """The text of dpkg's status database, None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None
