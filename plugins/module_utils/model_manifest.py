# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge a model directory against its record, a file the model directory cannot rewrite (issue 34).
Standard library only.

The record is written by the model_download role's helper (roles/model_download/files/hf_download.py)
after every file was hashed, atomically, as ``<record dir>/<record_name(model_dir)>`` (root-owned, outside
the model directory; the record dir is ``model_download_record_dir``, default /var/lib/gpufleet/models):

    {"format": 2, "model_path": "/shared/Qwen...", "repo": "org/name" | null, "revision": "main",
     "commit": "<40 hex>" | null, "source": "hub" | "adopted", "verified": "sha256",
     "verified_at": "<ISO 8601 UTC>",
     "files": {"config.json": {"size": 1234, "sha256": "<64 hex>", "git_oid": "<40 hex>",
                               "stat": [st_ino, st_mtime_ns, st_ctime_ns]}, ...}}

``sha256`` is the file's content as hashed on this host when it was fetched or first verified (a Hub
file only after it matched the Hub's own sha256 or git blob id). ``stat`` is what the file looked like
then: every later run compares size, inode, mtime and ctime (one stat per file, no hashing), so a file
replaced (new inode), edited (mtime, ctime) or edited with its mtime put back (ctime, which no one but
the kernel sets) shows as ``changed``, and the helper hashes only those files again.

A model directory may also hold files that the recorded files do not explain and that the server would
load (weight shards beyond the index, ``*.py`` remote code, ...): they are reported as ``stray``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re

RECORD_DIR = "/var/lib/gpufleet/models"
LEGACY_MANIFEST_NAME = ".gpufleet-manifest.json"
MANIFEST_NAME = LEGACY_MANIFEST_NAME  # the in-directory manifest of format 1 (before issue 34)
WORK_DIR_NAME = ".gpufleet"
# Left in <model>/.gpufleet/ when a record was written: a record that is gone is then "lost", not "never made".
RECORDED_MARKER = "recorded"
FORMAT = 2
# Directories inside a model directory that are bookkeeping, not model files.
BOOKKEEPING = (".cache", WORK_DIR_NAME)
# Files of this collection inside a model directory (never model files).
OWN_FILES = (LEGACY_MANIFEST_NAME, ".gpufleet-hf-token")
# What SGLang / transformers load from a model directory: weights, remote code, configs, tokenizers.
LOADABLE = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.pkl", "*.npz", "*.h5", "*.msgpack",
            "*.py", "*.pyc", "*.so", "*.json", "*.model", "*.tiktoken")


class ManifestError(Exception):
    """The record exists but cannot be used (unreadable, not JSON, wrong shape)."""


def record_name(model_dir):
    """The record's file name for MODEL_DIR: readable, and unique per path."""
    path = os.path.normpath(model_dir)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", path.strip("/"))[-80:] or "root"
    return "%s.%s.json" % (slug, hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12])


def record_path(model_dir, record_dir=RECORD_DIR):
    return os.path.join(record_dir, record_name(model_dir))


def manifest_path(model_dir, record_dir=RECORD_DIR):
    return record_path(model_dir, record_dir)


def fingerprint(info):
    return [info.st_ino, info.st_mtime_ns, info.st_ctime_ns]


def read_record(model_dir, record_dir=RECORD_DIR):
    """The record as a dict, None when there is none; ManifestError when it is unusable."""
    path = record_path(model_dir, record_dir)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ManifestError("%s cannot be read: %s" % (path, exc)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or not data["files"]:
        raise ManifestError("%s holds no file list" % path)
    if data.get("format") != FORMAT:
        raise ManifestError("%s has format %r, this role reads format %d" % (path, data.get("format"), FORMAT))
    if os.path.normpath(str(data.get("model_path"))) != os.path.normpath(model_dir):
        raise ManifestError("%s is the record of %s, not of %s" % (path, data.get("model_path"), model_dir))
    for name, entry in data["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or entry["size"] < 0:
            raise ManifestError("%s: entry %r has no valid size" % (path, name))
        if not isinstance(entry.get("stat"), list) or len(entry["stat"]) != 3:
            raise ManifestError("%s: entry %r has no stat fingerprint" % (path, name))
        if os.path.isabs(name) or ".." in name.split("/"):
            raise ManifestError("%s: entry %r is not a path inside the model directory" % (path, name))
    return data


read_manifest = read_record


def check_files(model_dir, files):
    """Problems, one stat per file: [{'path', 'reason': 'missing'|'not a file'|'size'|'changed', 'have', 'want'}].
    'changed': same size, but another inode, mtime or ctime than when the file was hashed."""
    problems = []
    for name in sorted(files):
        want = files[name]["size"]
        local = os.path.join(model_dir, name)
        try:
            info = os.stat(local)
        except FileNotFoundError:
            problems.append({"path": name, "reason": "missing", "have": None, "want": want})
            continue
        if not os.path.isfile(local):
            problems.append({"path": name, "reason": "not a file", "have": None, "want": want})
        elif info.st_size != want:
            problems.append({"path": name, "reason": "size", "have": info.st_size, "want": want})
        elif fingerprint(info) != files[name].get("stat"):
            problems.append({"path": name, "reason": "changed", "have": info.st_size, "want": want})
    return problems


check_sizes = check_files


def _allowed(name, allow):
    return any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(os.path.basename(name), pattern)
               for pattern in allow)


def stray_files(model_dir, known, allow=()):
    """Files under MODEL_DIR the server would load (LOADABLE) that KNOWN does not list and ALLOW (glob
    patterns, matched against the relative path and the base name) does not permit; sorted."""
    found = []
    if not os.path.isdir(model_dir):
        return found
    for top, dirs, names in os.walk(model_dir):
        rel_top = os.path.relpath(top, model_dir)
        if rel_top == ".":
            dirs[:] = [d for d in dirs if d not in BOOKKEEPING]
            rel_top = ""
        for name in names:
            rel = os.path.join(rel_top, name) if rel_top else name
            if rel in known or (not rel_top and name in OWN_FILES):
                continue
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in LOADABLE) and not _allowed(rel, allow):
                found.append(rel)
    return sorted(found)


def bytes_in_dir(model_dir):
    """Total size of the regular files under MODEL_DIR, bookkeeping directories excepted."""
    total = 0
    if not os.path.isdir(model_dir):
        return 0
    for top, dirs, names in os.walk(model_dir):
        if top == model_dir:
            dirs[:] = [d for d in dirs if d not in BOOKKEEPING]
        for name in names:
            path = os.path.join(top, name)
            if top == model_dir and name in OWN_FILES:
                continue
            try:
                if os.path.isfile(path) and not os.path.islink(path):
                    total += os.path.getsize(path)
            except OSError:
                continue
    return total


def describe(problems, limit=5):
    parts = []
    for problem in problems[:limit]:
        if problem["reason"] == "size":
            parts.append("%s (%d bytes, want %d)" % (problem["path"], problem["have"], problem["want"]))
        elif problem["reason"] == "changed":
            parts.append("%s (changed since it was hashed: other inode, mtime or ctime)" % problem["path"])
        else:
            parts.append("%s (%s)" % (problem["path"], problem["reason"]))
    if len(problems) > limit:
        parts.append("and %d more" % (len(problems) - limit))
    return ", ".join(parts)


def had_record(model_dir):
    """How MODEL_DIR shows that it was recorded before: 'marker' (the helper's marker), 'format 1' (a manifest
    of an older version, which lived in the model directory), or None. Neither can vouch for the files;
    either only makes a missing record an error instead of 'never verified'."""
    if os.path.isfile(os.path.join(model_dir, WORK_DIR_NAME, RECORDED_MARKER)):
        return "marker"
    if os.path.isfile(os.path.join(model_dir, LEGACY_MANIFEST_NAME)):
        return "format 1"
    return None


def check(model_dir, hub_repo="", hub_revision="main", record_dir=RECORD_DIR, allow_extra=()):
    """What the directory holds compared with its record. Keys: state, msg, problems, stray, manifest
    (summary or None), manifest_path, files, bytes, bytes_present, warnings.

    state: complete (every recorded file as it was hashed, no stray file), incomplete (some file missing,
    of another size, or changed since it was hashed: see problems), stray (the recorded files are as they
    were, but files the server would load are there that the record does not list), no_manifest (no
    record, and HUB_REPO can build one), record_lost (no record, HUB_REPO empty, but the directory was
    recorded before), other_source (a record for another repo/revision than HUB_REPO@HUB_REVISION),
    unverifiable (never recorded, no HUB_REPO)."""
    path = record_path(model_dir, record_dir)
    out = {"problems": [], "stray": [], "manifest": None, "files": 0, "bytes": 0, "warnings": [],
           "manifest_path": path}
    try:
        data = read_record(model_dir, record_dir)
    except ManifestError as exc:
        out["warnings"].append("%s; it is ignored and %s." % (
            exc, "rebuilt by hashing every file against the Hub listing" if hub_repo else
            "the model is treated as unrecorded"))
        data = None
    if data is None:
        out["bytes_present"] = bytes_in_dir(model_dir)
        lost = had_record(model_dir)
        evidence = (os.path.join(model_dir, WORK_DIR_NAME, RECORDED_MARKER) if lost == "marker" else
                    "%s, the manifest of an older version of this role, kept in the model directory and not trusted"
                    % os.path.join(model_dir, LEGACY_MANIFEST_NAME))
        if hub_repo:
            out["state"] = "no_manifest"
            out["msg"] = ("%s has no record (%s)%s: every file will be hashed against the listing of %s@%s and "
                          "recorded" % (model_dir, path, "" if not lost else ", although it was recorded before (%s)"
                                        % evidence, hub_repo, hub_revision))
            if lost == "marker":
                out["warnings"].append(out["msg"] + ". If you did not delete the record, find out who did.")
        elif lost:
            out["state"] = "record_lost"
            out["msg"] = ("%s was recorded before (%s), but its record %s is gone, and the profile names no hub_repo "
                          "to check the files against: they cannot be trusted as they are. Nothing was changed. Fix: "
                          "restore the record from a backup, or set the profile's hub_repo (and hub_revision) to "
                          "check every file against the Hub, or, only if you know the files are right, run once "
                          "with -e model_download_adopt=true to hash and record them as they are now."
                          % (model_dir, evidence, path))
        else:
            out["state"] = "unverifiable"
            out["msg"] = ("%s cannot be verified: it has no record (%s) and the profile names no hub_repo to "
                          "build one from. Its files are used as they are (%d bytes present); a truncated, edited or "
                          "added file shows only when SGLang loads it. Fix: set the profile's hub_repo (and "
                          "hub_revision) to the repo it was copied from, and the next run hashes every file against "
                          "the Hub listing and records it; or, if you know the files are right, run once with "
                          "-e model_download_adopt=true to hash and record them as they are."
                          % (model_dir, path, out["bytes_present"]))
        return out
    summary = {key: data.get(key) for key in ("repo", "revision", "commit", "source", "verified", "verified_at")}
    out["manifest"] = summary
    out["files"] = len(data["files"])
    out["bytes"] = sum(entry["size"] for entry in data["files"].values())
    if hub_repo and (data.get("repo") != hub_repo or str(data.get("revision")) != str(hub_revision)):
        out["state"] = "other_source"
        out["bytes_present"] = bytes_in_dir(model_dir)
        out["msg"] = ("%s has a record for %s@%s, the profile asks for %s@%s: the files will be checked against the "
                      "new listing" % (model_dir, data.get("repo"), data.get("revision"), hub_repo, hub_revision))
        return out
    problems = check_files(model_dir, data["files"])
    out["problems"] = problems
    wrong = {p["path"] for p in problems if p["reason"] != "changed"}
    out["bytes_present"] = sum(entry["size"] for name, entry in data["files"].items() if name not in wrong)
    out["stray"] = stray_files(model_dir, data["files"], allow_extra)
    source = "%s@%s" % (data.get("repo"), (data.get("commit") or "")[:12]) if data.get("repo") else "files adopted"
    if problems:
        out["state"] = "incomplete"
        out["msg"] = "%s: %d of %d files of %s are missing, of the wrong size or changed since they were hashed: %s" % (
            model_dir, len(problems), len(data["files"]), source, describe(problems))
    elif out["stray"]:
        out["state"] = "stray"
    else:
        out["state"] = "complete"
        out["msg"] = ("%s: all %d files of %s as they were when hashed (%d bytes; size, inode, mtime, ctime; "
                      "record %s, hashed %s)" % (model_dir, len(data["files"]), source, out["bytes"], path,
                                                 data.get("verified_at")))
    if out["stray"]:
        out["stray_msg"] = (
            "%s holds %d file(s) that its record (%s) does not list and that SGLang would load: %s. Nothing was "
            "changed. Fix: remove them (an added weight shard or *.py file is loaded as part of the model), or, if "
            "they belong there, allow them in model_download_allowed_extra_files (glob patterns, e.g. ['%s'])."
            % (model_dir, len(out["stray"]), path, ", ".join(out["stray"][:10]) + (
                " and %d more" % (len(out["stray"]) - 10) if len(out["stray"]) > 10 else ""), out["stray"][0]))
        if out["state"] == "stray":
            out["msg"] = out["stray_msg"]
    return out


def present_entries(model_dir, names):
    """The names of `names` that exist in model_dir (a dangling link counts), in order."""
    return [name for name in names if os.path.lexists(os.path.join(model_dir, name))]


__all__ = ["RECORD_DIR", "MANIFEST_NAME", "LEGACY_MANIFEST_NAME", "WORK_DIR_NAME", "RECORDED_MARKER", "FORMAT",
           "LOADABLE", "ManifestError", "record_name", "record_path", "read_record", "read_manifest", "check_files",
           "check_sizes", "check", "stray_files", "bytes_in_dir", "manifest_path", "describe", "had_record",
           "fingerprint", "present_entries"]
