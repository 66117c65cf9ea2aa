# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a model directory's manifest and check every listed file's size against it (one stat per
file). Standard library only.

The manifest is written by the model_download role's helper (roles/model_download/files/
hf_download.py) after a verified download, atomically, as ``<model dir>/.gpufleet-manifest.json``:

    {"format": 1, "repo": "org/name", "revision": "main", "commit": "<40 hex>",
     "verified": "size" | "sha256", "verified_at": "<ISO 8601 UTC>",
     "files": {"config.json": {"size": 1234, "git_oid": "<40 hex>"},
               "model-00001-of-00006.safetensors": {"size": 5000000000, "sha256": "<64 hex>",
                                                    "git_oid": "<40 hex>"}}}

``size`` and ``sha256`` are the Hub's (its tree listing: ``size`` and ``lfs.oid``, the value
huggingface_hub's file metadata reports as the ETag of an LFS file); ``git_oid`` is the git blob id
of the file as committed (of the LFS pointer for LFS files).
"""

from __future__ import annotations

import json
import os

MANIFEST_NAME = ".gpufleet-manifest.json"
WORK_DIR_NAME = ".gpufleet"
FORMAT = 1
# Directories inside a model directory that are bookkeeping, not model files.
BOOKKEEPING = (".cache", WORK_DIR_NAME)


class ManifestError(Exception):
    """The manifest exists but cannot be used (unreadable, not JSON, wrong shape)."""


def manifest_path(model_dir):
    return os.path.join(model_dir, MANIFEST_NAME)


def read_manifest(model_dir):
    """The manifest as a dict, None when there is none; ManifestError when it is unusable."""
    path = manifest_path(model_dir)
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
    for name, entry in data["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or entry["size"] < 0:
            raise ManifestError("%s: entry %r has no valid size" % (path, name))
        if os.path.isabs(name) or ".." in name.split("/"):
            raise ManifestError("%s: entry %r is not a path inside the model directory" % (path, name))
    return data


def check_sizes(model_dir, files):
    """Problems, one stat per file: [{'path', 'reason': 'missing'|'not a file'|'size', 'have', 'want'}]."""
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
    return problems


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
            if top == model_dir and name == MANIFEST_NAME:
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
        else:
            parts.append("%s (%s)" % (problem["path"], problem["reason"]))
    if len(problems) > limit:
        parts.append("and %d more" % (len(problems) - limit))
    return ", ".join(parts)


def check(model_dir, hub_repo="", hub_revision="main"):
    """What the directory holds compared with its manifest. Keys: state, msg, problems, manifest (summary
    or None), files, bytes, bytes_present, warnings.

    state: complete (every file present with the manifest's size), incomplete (some are not),
    no_manifest (none, or unusable, and HUB_REPO can build one), other_source (a manifest for another
    repo/revision than HUB_REPO@HUB_REVISION), unverifiable (no manifest and no HUB_REPO)."""
    out = {"problems": [], "manifest": None, "files": 0, "bytes": 0, "warnings": [],
           "manifest_path": manifest_path(model_dir)}
    try:
        data = read_manifest(model_dir)
    except ManifestError as exc:
        out["warnings"].append("%s; it is ignored and %s." % (
            exc, "rebuilt from the Hub listing" if hub_repo else "the model cannot be verified"))
        data = None
    if data is None:
        out["bytes_present"] = bytes_in_dir(model_dir)
        if hub_repo:
            out["state"] = "no_manifest"
            out["msg"] = ("%s has no manifest: the files will be checked against the listing of %s@%s"
                          % (model_dir, hub_repo, hub_revision))
        else:
            out["state"] = "unverifiable"
            out["msg"] = ("%s cannot be verified: it has no manifest (%s) and the profile names no hub_repo to "
                          "build one from. Its files are used as they are (%d bytes present); a truncated or "
                          "missing file shows only when SGLang fails to load it. Fix: set the profile's hub_repo "
                          "(and hub_revision) to the repo it was copied from, and the next run builds the manifest "
                          "from the Hub listing and checks every file." % (model_dir, MANIFEST_NAME, out["bytes_present"]))
        return out
    summary = {key: data.get(key) for key in ("repo", "revision", "commit", "verified", "verified_at")}
    out["manifest"] = summary
    out["files"] = len(data["files"])
    out["bytes"] = sum(entry["size"] for entry in data["files"].values())
    if hub_repo and (data.get("repo") != hub_repo or str(data.get("revision")) != str(hub_revision)):
        out["state"] = "other_source"
        out["bytes_present"] = bytes_in_dir(model_dir)
        out["msg"] = ("%s holds a manifest for %s@%s, the profile asks for %s@%s: the files will be checked "
                      "against the new listing" % (model_dir, data.get("repo"), data.get("revision"), hub_repo,
                                                   hub_revision))
        return out
    problems = check_sizes(model_dir, data["files"])
    out["problems"] = problems
    out["bytes_present"] = sum(entry["size"] for name, entry in data["files"].items()
                               if name not in {p["path"] for p in problems})
    source = "%s@%s" % (data.get("repo"), (data.get("commit") or "")[:12])
    if problems:
        out["state"] = "incomplete"
        out["msg"] = "%s: %d of %d files of %s are missing or have the wrong size: %s" % (
            model_dir, len(problems), len(data["files"]), source, describe(problems))
    else:
        out["state"] = "complete"
        out["msg"] = "%s: all %d files of %s present with the manifest's sizes (%d bytes; content last hashed: %s)" % (
            model_dir, len(data["files"]), source, out["bytes"],
            data.get("verified_at") if data.get("verified") == "sha256" else "never")
    return out


def present_entries(model_dir, names):
    """The names of `names` that exist in model_dir (a dangling link counts), in order."""
    return [name for name in names if os.path.lexists(os.path.join(model_dir, name))]


__all__ = ["MANIFEST_NAME", "WORK_DIR_NAME", "FORMAT", "ManifestError", "read_manifest", "check_sizes", "check",
           "bytes_in_dir", "manifest_path", "describe", "present_entries"]
