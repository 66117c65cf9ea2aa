# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Keep each forked task worker's garbage collector off the objects it inherits from ansible-playbook.

ansible-playbook forks one worker process per task and host, skipped tasks included. The worker inherits the
controller's whole heap (the play, every role's defaults and variables, the registered results) copy-on-write. When
the worker's own allocations trigger a full collection, Python's collector walks and writes the header of every
inherited object, so the kernel copies nearly every page of that heap, for each task. On a no-op site.yml of one host
(113 tasks) that was about 2 of 12.5 controller CPU seconds (issue 20, docs/performance.md "Sixth tranche").

`gc.freeze()` right after the fork moves every inherited object to the collector's permanent generation, which it
never examines: the worker still collects what it allocates itself, and the parent is untouched (it keeps collecting
as before; nothing of it is frozen).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: worker_gc
author:
  - gpufleet maintainers (@gpufleet)
type: aggregate
short_description: stop forked task workers from copying the controller's heap when they collect garbage
version_added: 1.0.0
description:
  - Registers, once per ansible-playbook process, a fork handler that calls Python's C(gc.freeze()) in every
    process forked from it, that is in every task worker. The worker's garbage collector then leaves the objects
    inherited from ansible-playbook alone, instead of walking (and so copying, page by page) the controller's heap
    on a full collection.
  - Objects the worker allocates itself are collected as usual; the controller's own process is not changed.
  - Prints nothing. Enable it in C(ansible.cfg) (C(callbacks_enabled = gpufleet.llm_server.worker_gc), as this
    collection's C(ansible.cfg) does) or with E(ANSIBLE_CALLBACKS_ENABLED).
requirements:
  - a controller on a POSIX system (the fork handler needs C(os.register_at_fork))
seealso:
  - name: Python's gc.freeze
    description: Freeze all the objects tracked by the garbage collector.
    link: https://docs.python.org/3/library/gc.html#gc.freeze
"""

import functools
import gc
import os

from ansible.plugins.callback import CallbackBase


@functools.cache
def register_worker_gc_freeze() -> None:
    """Register gc.freeze as an after-fork handler of this process (once, however often it is called)."""
    os.register_at_fork(after_in_child=gc.freeze)


class CallbackModule(CallbackBase):
    """Aggregate callback with no output: its loading registers the fork handler."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.llm_server.worker_gc"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        register_worker_gc_freeze()
