# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The restart-pending marker: "the server on this host runs older code or settings than the disk".

Handlers live only as long as one ansible-playbook run: a change whose handler never ran (a later
task failed, the connection dropped, Ctrl-C) used to be forgotten, and the next, successful run
changed nothing and restarted nothing, so the server kept serving the old code (issue 17). The
marker is a file on the host, written by the very step that changes something the server uses
(the module that patches, writes the unit, stores a credential or runs pip), before that change
lands. It is removed only by the server's own start of its unit as it is on disk (an
`ExecStartPre=+-` in the unit that removes it when systemd reports NeedDaemonReload=no), which is
exactly the event that picks the change up, whoever triggers it (the role, a reboot, systemd's
Restart=, an operator); a start of an older loaded unit leaves it.

Format: one JSON object per line, {"at": ISO time, "source": who, "reason": what changed}; lines are
appended with O_APPEND, so concurrent writers (the model download job and a module) never lose
each other's lines. Only its existence decides; the lines say why, for the operator and the play.
"""

from __future__ import annotations

import datetime
import json
import os

MARKER_MODE = 0o600
MARKER_DIR_MODE = 0o700


class MarkerError(OSError):
    """The marker could not be written: the change must not go ahead without it."""


def entry(source, reason, now=None):
    """One marker line (without the newline)."""
    when = now or datetime.datetime.now(datetime.timezone.utc)
    return json.dumps({"at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "source": str(source), "reason": str(reason)},
                      sort_keys=True)


def mark(path, source, reason, now=None):
    """Append one line to the marker at PATH (creating it 0600 and its directory 0700), and fsync it.

    Called BEFORE the change it announces: a change that fails after its mark costs at most one
    restart that was not needed; a mark written after the change could be lost with the run."""
    directory = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=MARKER_DIR_MODE, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, MARKER_MODE)
        try:
            os.write(fd, (entry(source, reason, now) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise MarkerError(exc.errno, "cannot write the restart-pending marker %s: %s" % (path, exc.strerror))


def read(path):
    """The marker's entries as dicts ([] when there is no marker); unreadable lines come back as text."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append({"at": None, "source": None, "reason": line})
    return out


def maybe_mark(module, path, source, reason):
    """mark() for a module: nothing when PATH is empty or in check mode; a failed mark fails the module."""
    if not path or module.check_mode:
        return False
    try:
        mark(path, source, reason)
    except MarkerError as exc:
        module.fail_json(msg="%s. Nothing was changed. Fix the permissions of %s (the restart_marker option) "
                             "and run again." % (exc.strerror, os.path.dirname(path)), changed=False)
    return True
