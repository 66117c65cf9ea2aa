# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only host reads shared by the state modules (issue 20): dpkg's status database, managed files
compared the way ansible.builtin.template / copy / file would, symlinks, and dpkg's alternatives.

Everything that decides is pure: the parsers take text, the comparisons take what `read_file` /
`lstat` returned. The I/O helpers at the end are thin and injectable (tests point them at a tree).
The rule throughout: when unsure, say "differs"; the writer then runs and reports ok. Saying "same"
when the writer would change something silently stops management (plan section 5).

Standard library only.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import re
import stat

from ansible_collections.gpufleet.llm_server.plugins.module_utils.apt_transaction import parse_dpkg_status

DPKG_STATUS = "/var/lib/dpkg/status"
DPKG_ALTERNATIVES = "/var/lib/dpkg/alternatives"
# dpkg states in which a package's files are fully there and configured.
SETTLED_STATES = ("installed", "not-installed", "config-files")

__all__ = ["parse_dpkg_status", "parse_dpkg_status_file", "installed_and_held", "unsettled", "parse_relations",
           "dependency_closure", "compare_file", "compare_directory", "compare_link", "parse_alternatives",
           "parse_systemctl_show", "apt_lists_signature", "lists_entries", "read_file", "lstat", "file_state", "read_link", "read_alternative"]


# -- dpkg ------------------------------------------------------------------------------------------
def parse_dpkg_status_file(text):
    """/var/lib/dpkg/status -> {name: {version, want, flag, state, arch, depends, pre_depends, provides}}.

    The relation fields are kept as dpkg wrote them (parse them with parse_relations). Continuation
    lines (a leading space) belong to the field above. A name present for several architectures
    (multi-arch) keeps the installed stanza, the first one when several are.
    """
    packages = {}
    for block in re.split(r"\n\s*\n", text):
        fields, last = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += "\n" + line.strip()
            elif ":" in line:
                last, value = line.split(":", 1)
                fields[last] = value.strip()
        name = fields.get("Package")
        if not name:
            continue
        want, flag, state = (fields.get("Status", "unknown ok not-installed").split() + ["", "", ""])[:3]
        entry = {"version": fields.get("Version", ""), "want": want, "flag": flag, "state": state,
                 "arch": fields.get("Architecture", ""), "depends": fields.get("Depends", ""),
                 "pre_depends": fields.get("Pre-Depends", ""), "provides": fields.get("Provides", "")}
        previous = packages.get(name)
        if previous is None or (previous["state"] != "installed" and state == "installed"):
            packages[name] = entry
    return packages


def installed_and_held(packages):
    """The same ({name: version}, {held}) as apt_transaction.parse_dpkg_status, from parse_dpkg_status_file.

    parse_dpkg_status counts status letter 'i' (dpkg state "installed") and want letter 'h' (hold).
    """
    installed = {name: p["version"] for name, p in packages.items() if p["state"] == "installed"}
    held = {name for name, p in packages.items() if p["want"] == "hold"}
    return installed, held


def unsettled(packages):
    """Names (sorted) dpkg left half-way (unpacked, half-configured, triggers pending...) or marked
    reinst-required: apt would act on them, so nothing can be decided without apt."""
    return sorted(name for name, p in packages.items()
                  if p["state"] not in SETTLED_STATES or p["flag"] not in ("ok", ""))


def parse_relations(text):
    """'a (>= 1), b | c:any, d [amd64]' -> [['a'], ['b', 'c'], ['d']]: the names of each alternative group.

    Version constraints and architecture qualifiers are dropped: the closure is over names, like
    `apt-cache depends --recurse`, which lists every alternative.
    """
    groups = []
    for group in (text or "").replace("\n", " ").split(","):
        names = []
        for alternative in group.split("|"):
            name = re.split(r"[\s(\[<]", alternative.strip(), maxsplit=1)[0].split(":", 1)[0]
            if name:
                names.append(name)
        if names:
            groups.append(names)
    return groups


def dependency_closure(packages, roots):
    """Installed packages reachable from roots over Depends and Pre-Depends, resolving each name to the
    installed package of that name and to every installed package that Provides it.

    This follows the INSTALLED versions' relations; apt_transaction's closure (`apt-cache depends
    --recurse`) follows the CANDIDATES'. They agree while the installed versions are the candidates (or
    the candidates declare the same relations); see nvidia_driver_rules.fast_keep for how that is guarded.
    """
    installed = {name: p for name, p in packages.items() if p["state"] == "installed"}
    providers = {}
    for name, p in installed.items():
        for group in parse_relations(p["provides"]):
            for virtual in group:
                providers.setdefault(virtual, set()).add(name)
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        for real in ({name} if name in installed else set()) | providers.get(name, set()):
            if real in seen:
                continue
            seen.add(real)
            for field in ("pre_depends", "depends"):
                for group in parse_relations(installed[real][field]):
                    stack.extend(group)
    return seen


# -- files -----------------------------------------------------------------------------------------
def _owner_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def file_state(path, read=None, stat_=None):
    """{exists, kind: file|directory|link|other|None, content (bytes, files only), mode ('0644'), owner, group}."""
    read = read or read_file
    stat_ = stat_ or lstat
    info = stat_(path)
    if info is None:
        return {"exists": False, "kind": None}
    if stat.S_ISLNK(info.st_mode):
        kind = "link"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    result = {"exists": True, "kind": kind, "mode": "%04o" % stat.S_IMODE(info.st_mode),
              "owner": _owner_name(info.st_uid), "group": _group_name(info.st_gid)}
    if kind == "file":
        result["content"] = read(path)
    return result


def _normalize_mode(mode):
    if mode is None:
        return None
    if isinstance(mode, int):
        return "%04o" % mode
    mode = str(mode)
    if not re.match(r"^0?[0-7]{3,4}$", mode):
        raise ValueError("mode %r is not an octal string such as '0644' (symbolic modes are not compared)" % mode)
    return "%04o" % int(mode, 8)


def _metadata_reasons(spec, state):
    reasons = []
    want_mode = _normalize_mode(spec.get("mode"))
    if want_mode is not None and state["mode"] != want_mode:
        reasons.append("mode %s, wanted %s" % (state["mode"], want_mode))
    for key in ("owner", "group"):
        if spec.get(key) is not None and state[key] != str(spec[key]):
            reasons.append("%s %s, wanted %s" % (key, state[key], spec[key]))
    return reasons


def compare_file(spec, state):
    """Why a template/copy (or file state=absent) task would change this file; [] when it would not.

    spec: {path, content: str|bytes|None (None: the file must be absent), mode, owner, group}; state: file_state().
    template/copy compare the content's checksum and then mode and owner/group (by name) when set; a
    link or a directory at the path is not what they would leave, so it differs.
    """
    if spec.get("content") is None:
        return ["present, wanted absent"] if state["exists"] else []
    if not state["exists"]:
        return ["absent"]
    if state["kind"] != "file":
        return ["a %s, wanted a file" % state["kind"]]
    wanted = spec["content"]
    if isinstance(wanted, str):
        wanted = wanted.encode("utf-8")
    reasons = [] if state["content"] == wanted else ["content differs"]
    return reasons + _metadata_reasons(spec, state)


def compare_directory(spec, state):
    """Why `file: state=directory` would change this path ([] when it would not)."""
    if not state["exists"]:
        return ["absent"]
    if state["kind"] != "directory":
        return ["a %s, wanted a directory" % state["kind"]]
    return _metadata_reasons(spec, state)


def compare_link(target, current):
    """Why `file: state=link src=target` would change the link; current is read_link()'s answer."""
    if current is None:
        return ["no link"]
    return [] if current == target else ["points to %s, wanted %s" % (current, target)]


# -- alternatives ----------------------------------------------------------------------------------
def parse_alternatives(text):
    """/var/lib/dpkg/alternatives/<name> -> {status, link, slaves: [(name, link)], choices: [{path, priority, slaves}]}.

    Format (update-alternatives(1), dpkg's alternatives.c): status (auto|manual), the master link, then
    slave name/link line pairs, an empty line; then per choice its path, its priority and one line per
    slave (empty when the choice has none for that slave); an empty line ends the file.
    """
    lines = text.split("\n")
    status, link = lines[0].strip(), lines[1].strip()
    index, slaves = 2, []
    while index + 1 < len(lines) and lines[index] != "":
        slaves.append((lines[index], lines[index + 1]))
        index += 2
    index += 1
    choices = []
    while index + 1 < len(lines) and lines[index] != "":
        path, priority = lines[index], lines[index + 1]
        choice_slaves = lines[index + 2:index + 2 + len(slaves)]
        choices.append({"path": path, "priority": int(priority),
                        "slaves": dict((name, value) for (name, _link), value in zip(slaves, choice_slaves) if value)})
        index += 2 + len(slaves)
    return {"status": status, "link": link, "slaves": slaves, "choices": choices}


# -- systemd and apt indexes ---------------------------------------------------------------------
def parse_systemctl_show(text):
    """`systemctl show -p Id -p ... A B` -> [{property: value}, ...], one dict per unit, in order."""
    units, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                units.append(current)
            current = {}
        elif "=" in line:
            key, value = line.split("=", 1)
            current[key] = value
    if current:
        units.append(current)
    return units


def apt_lists_signature(entries):
    """A digest of the apt index files (name, size, mtime_ns) from `lists_entries`: it changes whenever
    `apt-get update` fetched something new, so a decision made against one set of indexes can be tied to it."""
    digest = hashlib.sha256()
    for name, size, mtime_ns in sorted(entries):
        digest.update(("%s\0%d\0%d\n" % (name, size, mtime_ns)).encode("utf-8"))
    return digest.hexdigest()


def lists_entries(lists_dir="/var/lib/apt/lists"):
    """(name, size, mtime_ns) of every *_Packages* index apt has (compressed or not), [] without the directory."""
    try:
        names = sorted(os.listdir(lists_dir))
    except OSError:
        return []
    entries = []
    for name in names:
        if "_Packages" in name:
            info = lstat(os.path.join(lists_dir, name))
            if info is not None:
                entries.append((name, info.st_size, info.st_mtime_ns))
    return entries


# -- I/O (thin, injectable) ------------------------------------------------------------------------
def read_file(path, default=None):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return default


def lstat(path):
    try:
        return os.lstat(path)
    except OSError:
        return None


def read_link(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def read_alternative(name, root="/"):
    """(parsed alternatives file or None, the current choice from /etc/alternatives/<name> or None)."""
    text = read_file(os.path.join(root, DPKG_ALTERNATIVES.lstrip("/"), name))
    parsed = parse_alternatives(text.decode("utf-8", "replace")) if text else None
    return parsed, read_link(os.path.join(root, "etc/alternatives", name))
