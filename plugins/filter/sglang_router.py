# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the sglang_router role: its workers from the inventory and its command line.

The logic is in module_utils/sglang_router.py (unit-tested there); these only hand it the hosts' variables.
"""

from __future__ import annotations

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_router import (
    loopback_workers,
    router_argv,
    worker_urls,
)


def _hosts(names, hostvars):
    return [(name, hostvars[name]) for name in names]


def sglang_router_worker_urls(names, hostvars):
    return worker_urls(_hosts(names, hostvars))


def sglang_router_loopback_workers(names, hostvars, router_host):
    return loopback_workers(_hosts(names, hostvars), router_host)


def sglang_router_argv(workers, python, options, extra_args=()):
    return router_argv(python, options, workers, extra_args)


class FilterModule:
    def filters(self):
        return {
            "sglang_router_worker_urls": sglang_router_worker_urls,
            "sglang_router_loopback_workers": sglang_router_loopback_workers,
            "sglang_router_argv": sglang_router_argv,
        }
