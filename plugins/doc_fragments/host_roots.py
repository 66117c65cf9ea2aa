# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """Roots of the kernel trees a module reads; tests point them at a fake tree."""

    DOCUMENTATION = r"""
options:
  sysfs_root:
    description: Root of the sysfs tree (tests point it at a fake tree).
    type: path
    default: /sys
  procfs_root:
    description: Root of the procfs tree (tests point it at a fake tree).
    type: path
    default: /proc
"""

    DEV = r"""
options:
  dev_root:
    description: Directory of the device nodes, C(nvidiaN) among them (tests point it at a fake tree).
    type: path
    default: /dev
"""
