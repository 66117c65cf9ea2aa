# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the cuda_toolkit role has to change, from one read of the host (issue 20).

The role's no-op used to reach the host four times (dpkg, `update-alternatives --query cuda`, the profile
template, `nvcc --version`). `decide` takes what those reads would have seen and returns the same decisions
the role's tasks made from them; `read` gathers it (injectable, for tests). Standard library only.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.host_state import (
    compare_file,
    compare_link,
    file_state,
    read_alternative,
    read_link,
)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.package_state import (
    DPKG_STATUS,
    missing_packages,
    read_status,
)

# What `nvcc --version` prints on its last lines: "Cuda compilation tools, release 13.0, V13.0.48".
NVCC_RELEASE = re.compile(r"release ([0-9]+[.][0-9]+)")
ALTERNATIVE = "cuda"

__all__ = ["ALTERNATIVE", "nvcc_release", "decide", "read"]


def nvcc_release(stdout):
    """The 'X.Y' of nvcc's `release X.Y`, '' when there is none."""
    match = NVCC_RELEASE.search(stdout or "")
    return match.group(1) if match else ""


def decide(packages, status_text, alternative, alternative_value, link_target, home, profile, profile_state):
    """The role's decisions, as its separate tasks made them.

    alternative: the parsed /var/lib/dpkg/alternatives/cuda or None (what rc 2 of --query meant: none
    registered); alternative_value: /etc/alternatives/cuda's target (--query's `Value:`); link_target: what the
    link points to (None: no link). With an alternative registered the role sets it (update-alternatives
    --set) when its value is not the home; without one it manages the link itself (file state=link).
    """
    missing, installed, reasons = missing_packages(packages, status_text)
    registered = alternative is not None
    profile_reasons = compare_file(profile, profile_state)
    return {
        "missing": missing,
        "installed": installed,
        "reasons": {"packages": reasons, "profile": profile_reasons,
                    "link": [] if registered else compare_link(home, link_target)},
        "alternative": {"registered": registered, "value": alternative_value or ""},
        "needs": {
            "packages": bool(missing),
            "alternative": registered and alternative_value != home,
            "link": (not registered) and bool(compare_link(home, link_target)),
            "profile": bool(profile_reasons),
        },
    }


def read(packages, home, link, profile, run_command, dpkg_status=DPKG_STATUS, root="/"):
    """Read the host once and decide; run_command(argv) -> (rc, stdout, stderr) runs nvcc.

    nvcc is asked only when it exists (the role asks it again after a change); its answer is returned
    verbatim with the release it names.
    """
    alternative, value = read_alternative(ALTERNATIVE, root=root)
    result = decide(packages, read_status(dpkg_status), alternative, value, read_link(link), home, profile,
                    file_state(profile["path"]))
    nvcc = os.path.join(home, "bin", "nvcc")
    if os.path.exists(nvcc):
        rc, stdout, stderr = run_command([nvcc, "--version"])
    else:
        rc, stdout, stderr = 2, "", "%s: no such file" % nvcc
    result["nvcc"] = {"rc": rc, "stdout": stdout, "stderr": stderr, "release": nvcc_release(stdout)}
    result["resources"] = [dpkg_status, os.path.join(root, "etc/alternatives", ALTERNATIVE) if alternative else link,
                           profile["path"], nvcc]
    return result
