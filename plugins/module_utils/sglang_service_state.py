# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the sglang_service role reads on its no-op path, one call per read (issue 20, issue 34).

Three reads, each replacing one remote command of the role:
- `read_host` (tasks/steps.yml, tasks/access.yml): the server's account (passwd, group, its groups), the
  root-only directories, the previous deployment record, and whether the server's user can use what it runs
  (checked in a forked child that drops to that user: `access_check`);
- `read_known_good` (tasks/mark_known_good.yml): the snapshot compared with its sources;
- `read_apply` (tasks/apply.yml): the unit file, the restart-pending marker, the units of other profiles and
  the unit's systemd state.
Paths are real paths of the host (tests give a tmp tree); `run` is the command runner
(AnsibleModule.run_command or a test's). Standard library only.
"""

from __future__ import annotations

import fnmatch
import grp
import json
import os
import pwd

from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import restart_marker

# What the role writes into its units (templates/sglang.service.j2): a unit of another profile names it.
ROLE_MARK = b"gpufleet.llm_server.sglang_service"
SHOW_PROPERTIES = ("LoadState", "ActiveState", "UnitFileState", "NeedDaemonReload")
# kind -> (os.access mode, what the refusal says)
ACCESS_KINDS = {
    "x": (os.X_OK, "not executable"),
    "r": (os.R_OK, "not readable"),
    "d": (os.R_OK | os.X_OK, "not readable and searchable"),
}
SNAPSHOT_PATTERNS = ("*.service", "*.env", "deployment-*.json", "deployment-*.md")

__all__ = ["ReadError", "ACCESS_KINDS", "account", "directory_differs", "previous_record", "access_check",
           "read_host", "read_known_good", "read_apply"]


class ReadError(Exception):
    """A read the role must not guess past (the access check without root): the module fails with it."""


# -- host ------------------------------------------------------------------------------------------
def account(user, group):
    """The account as getent/id see it: {passwd, group, groups}; passwd/group None when absent.

    groups: the names of every group the user is in (its primary group first, as `id -nG` lists them);
    a gid without a name comes back as its number, as `id` prints it.
    """
    try:
        entry = pwd.getpwnam(user)
        passwd = {"name": entry.pw_name, "uid": entry.pw_uid, "gid": entry.pw_gid, "gecos": entry.pw_gecos,
                  "home": entry.pw_dir, "shell": entry.pw_shell}
    except KeyError:
        passwd = None
    group_entry = None
    if group:
        try:
            found = grp.getgrnam(group)
            group_entry = {"name": found.gr_name, "gid": found.gr_gid, "members": list(found.gr_mem)}
        except KeyError:
            pass
    groups = []
    if passwd is not None:
        for gid in _group_ids(passwd):
            try:
                name = grp.getgrgid(gid).gr_name
            except KeyError:
                name = str(gid)
            if name not in groups:
                groups.append(name)
    return {"passwd": passwd, "group": group_entry, "groups": groups}


def _group_ids(passwd):
    """The user's primary gid first, then its supplementary gids (getgrouplist), without repeats."""
    ids = [passwd["gid"]]
    for gid in os.getgrouplist(passwd["name"], passwd["gid"]):
        if gid not in ids:
            ids.append(gid)
    return ids


def directory_differs(path, mode):
    """True unless path is a real directory (not a link) of that mode owned by root:root."""
    state = hs.file_state(path)
    return not (state["exists"] and state["kind"] == "directory" and state["mode"] == "%04o" % int(str(mode), 8)
                and state["owner"] == "root" and state["group"] == "root")


def previous_record(path):
    """The previous deployment record ({} when there is none, or when it is no JSON object: it is rewritten)."""
    if not path or not os.path.isfile(path):
        return {}
    raw = hs.read_file(path)
    try:
        parsed = json.loads(raw.decode("utf-8")) if raw is not None else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _judge(items):
    """In the child, as the server's user: one refusal per item it cannot use."""
    problems = []
    for item in items:
        mode, what = ACCESS_KINDS[item["kind"]]
        if not os.access(item["path"], mode):
            problems.append("%s (%s)" % (item["path"], what))
    return problems


def access_check(passwd, items):
    """What the user of `passwd` cannot use of items [{kind: x|r|d, path}], as "PATH (not readable)" strings.

    Paths absent (for root) are not judged: check mode, or a model still to be placed by hand, is
    preflight's and model_download's question. The rest is judged in a forked child that takes the user's
    groups, gid and uid (so os.access answers for that user, supplementary groups included) and sends its
    answer through a pipe. Needs root (ReadError otherwise).
    """
    present = [item for item in items if os.path.exists(item["path"])]
    if not present:
        return []
    if os.geteuid() != 0:
        raise ReadError("sglang_service_user=%s: checking what that user can use needs root (this runs as euid %d). "
                        "Nothing was changed. Fix: run the role as root (become: true), or set "
                        "sglang_service_user: root." % (passwd["name"], os.geteuid()))
    gids = _group_ids(passwd)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's result is what the parent asserts
        status = 0
        try:
            os.close(read_end)
            os.setgroups(gids)
            os.setgid(passwd["gid"])
            os.setuid(passwd["uid"])
            answer = {"problems": _judge(present)}
        except Exception as exc:  # pylint: disable=broad-except
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
            status = 1
        try:
            with os.fdopen(write_end, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(answer))
        finally:
            # No atexit handlers, no flushing of the parent's buffers: the child only answers.
            os._exit(status)  # pylint: disable=protected-access
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as handle:
        text = handle.read()
    _pid, status = os.waitpid(pid, 0)
    try:
        answer = json.loads(text)
    except ValueError:
        answer = {"error": "no answer (exit status %d)" % status}
    if "error" in answer or status != 0:
        raise ReadError("sglang_service_user=%s: the check of what that user can use (as uid %d) failed: %s. "
                        "Nothing was changed. Fix: run the role as root (become: true) on a host where root may "
                        "change its uid and groups." % (passwd["name"], passwd["uid"],
                                                        answer.get("error", "exit status %d" % status)))
    return answer["problems"]


def read_host(user, group="", directories=(), record="", access=None):
    """tasks/steps.yml's and tasks/access.yml's read.

    directories: [{path, mode}] each reported in directories_differ unless a root-owned directory of that
    mode; record: the previous deployment record's path ('' for none); access: [{kind, path}] to check as
    the user, or None for no check. access_checked is true when the check ran (access given, user exists).
    """
    found = account(user, group)
    result = dict(found)
    result["directories_differ"] = [item["path"] for item in directories if directory_differs(item["path"], item["mode"])]
    result["previous_record"] = previous_record(record)
    result["access_checked"] = access is not None and found["passwd"] is not None
    result["access_problems"] = access_check(found["passwd"], access) if result["access_checked"] else []
    return result


# -- known good --------------------------------------------------------------------------------------
def _attrs_are(path, mode, kind):
    state = hs.file_state(path)
    return (state["exists"] and state["kind"] == kind and state["mode"] == mode
            and state["owner"] == "root" and state["group"] == "root")


def _same_file(src, dest):
    """The snapshot dest has src's bytes and is a root-owned 0600 file (not a link)."""
    if not _attrs_are(dest, "0600", "file"):
        return False
    content = hs.read_file(src)
    return content is not None and content == hs.read_file(dest)


def _files(directory, patterns=("*",)):
    """Regular files (links followed) in directory matching a pattern, sorted, without hidden ones (a shell glob's set)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [name for name in names
            if not name.startswith(".") and any(fnmatch.fnmatchcase(name, p) for p in patterns)
            and os.path.isfile(os.path.join(directory, name))]


def read_known_good(known_good_dir, credential_dir, build_link, unit, unit_snapshot, env_file, env_snapshot, records):
    """tasks/mark_known_good.yml's comparison of the snapshot with its sources.

    Returns differs (snapshot files or directories absent or not as the source / not root-owned 0600, 0700 for
    directories), missing (the unit or the environment file absent), records (those of `records` that exist, in
    that order), credentials (names, sorted), stale (snapshot files no longer wanted), build (the target of
    build_link, '' without a link) and known_good ({content, mode, owner, group} of known-good.json, or None).
    Credential files are compared, never returned.
    """
    kg = known_good_dir.rstrip("/") or "/"
    kg_cred = os.path.join(kg, "credentials")
    differs = [path for path in (kg, kg_cred) if not _attrs_are(path, "0700", "directory")]
    missing = [src for src in (unit, env_file) if not os.path.isfile(src)]
    for src, name in ((unit, unit_snapshot), (env_file, env_snapshot)):
        if os.path.isfile(src) and not _same_file(src, os.path.join(kg, name)):
            differs.append(os.path.join(kg, name))
    found_records = [src for src in records if os.path.exists(src)]
    for src in found_records:
        dest = os.path.join(kg, os.path.basename(src))
        if not _same_file(src, dest):
            differs.append(dest)
    credentials = _files(credential_dir)
    for name in credentials:
        if not _same_file(os.path.join(credential_dir, name), os.path.join(kg_cred, name)):
            differs.append(os.path.join(kg_cred, name))
    stale = [os.path.join(kg_cred, name) for name in _files(kg_cred) if name not in credentials]
    kept = {unit_snapshot, env_snapshot} | {os.path.basename(src) for src in records}
    stale += [os.path.join(kg, name) for name in _files(kg, SNAPSHOT_PATTERNS) if name not in kept]
    build = os.path.realpath(build_link) if build_link and os.path.islink(build_link) else ""
    known_good = None
    record_path = os.path.join(kg, "known-good.json")
    if os.path.isfile(record_path):
        state = hs.file_state(record_path)
        raw = hs.read_file(record_path, b"")
        known_good = {"content": raw.decode("utf-8", "replace"), "mode": state.get("mode"),
                      "owner": state.get("owner"), "group": state.get("group")}
    return {"differs": differs, "missing": missing, "records": found_records, "credentials": credentials,
            "stale": stale, "build": build, "known_good": known_good}


# -- apply -------------------------------------------------------------------------------------------
def _other_units(unit, unit_name):
    """Plain files sglang-*.service next to the unit (not links, not the unit) that this role wrote."""
    directory = os.path.dirname(unit) or "."
    others = []
    for name in _files(directory, ("sglang-*.service",)):
        path = os.path.join(directory, name)
        if name == unit_name or os.path.islink(path):
            continue
        content = hs.read_file(path, b"")
        if ROLE_MARK in content:
            others.append(name)
    return others


def read_apply(unit, restart_marker_path, unit_name, run, systemctl):
    """tasks/apply.yml's read: unit_present, restart_reasons (the marker's entries), other_units, status.

    run(argv) -> (rc, stdout, stderr); systemctl: its path, or None where there is none (status is then {},
    which the role reads as a unit that is not loaded).
    """
    status = {}
    if systemctl:
        argv = [systemctl, "show"]
        for name in SHOW_PROPERTIES:
            argv += ["-p", name]
        _rc, stdout, _stderr = run(argv + ["--", unit_name])
        units = hs.parse_systemctl_show(stdout or "")
        status = units[0] if units else {}
    reasons = []
    if restart_marker_path and os.path.isfile(restart_marker_path):
        reasons = restart_marker.read(restart_marker_path)
    return {"unit_present": os.path.isfile(unit), "restart_reasons": reasons,
            "other_units": _other_units(unit, unit_name), "status": status}
