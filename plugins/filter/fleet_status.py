# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of playbooks/status.yml: the fleet's plan and its outputs, worked out on the controller.

The logic is in module_utils/fleet_plan.py (unit-tested there); these only hand it the play's data.
"""

from __future__ import annotations

from ansible_collections.gpufleet.llm_server.plugins.module_utils.fleet_plan import report, table, textfile


def fleet_status_report(hosts, batch=1, reboot_seconds=None, generated=None):
    return report(list(hosts), batch, reboot_seconds, generated)


def fleet_status_table(status_report):
    return table(status_report)


def fleet_status_textfile(status_report, host, now):
    return textfile(host, status_report["hosts"][host], now)


class FilterModule:
    def filters(self):
        return {
            "fleet_status_report": fleet_status_report,
            "fleet_status_table": fleet_status_table,
            "fleet_status_textfile": fleet_status_textfile,
        }
