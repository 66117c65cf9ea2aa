# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The dpkg status database read by the package state modules."""

    DOCUMENTATION = r"""
options:
  dpkg_status:
    description: dpkg's status database. Another path only for a chroot or a test tree.
    type: path
    default: /var/lib/dpkg/status
"""
