# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the sglang_build role reads from the commit it is about to build, before any change (issue 32).

SGLang's main branch builds Rust extensions (setuptools-rust, PyO3) from the Cargo workspace in ``rust/``:
``python/setup.py`` discovers every crate whose ``Cargo.toml`` declares ``[package.metadata.sglang]
python-module`` (or ``python-bin``) by running ``cargo metadata`` on ``rust/Cargo.toml`` (plus the manifests
its ``[workspace.metadata.sglang] extension-manifests`` names), narrows them by the pyproject's
``[tool.sglang] rust-extensions`` allowlist and by ``SGLANG_BUILD_RUST_EXTS`` (unset/``all``, ``none``, or a
comma list of case-insensitive substrings), and needs cargo unless that is ``none``. ``rust/rust-toolchain.toml``
pins the toolchain channel. The functions here read the same files from git (no cargo needed) so that the
role can name the extensions, check a toolchain, and refuse before anything changes.

Pure functions over file texts, plus ``check_toolchain`` (runs ``cargo --version`` and ``rustc --version``
through the caller's runner).
"""

from __future__ import annotations

import os
import re
import stat

RUST_ENV = "SGLANG_BUILD_RUST_EXTS"
_TOKEN = re.compile(r"^[a-z0-9_.-]+$")
# setup.py's allowlist regex: a single line `rust-extensions = ["..."]` in the pyproject.
_ALLOWLIST = re.compile(r"^rust-extensions\s*=\s*\[([^\]]*)\]", re.MULTILINE)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")

__all__ = ["RUST_ENV", "rust_request", "toolchain_channel", "version_tuple", "workspace_manifests",
           "rust_extensions", "select", "build_requires", "rust_era", "check_toolchain", "toolchain_environment",
           "toolchain_refusal", "selection_refusal", "request_refusal", "torch_pin_refusal"]


def _toml(text):
    import tomllib  # Python >= 3.11 on the collection's targets
    return tomllib.loads(text)


def rust_request(value):
    """(SGLANG_BUILD_RUST_EXTS value, tokens or None, error or None) for sglang_build_rust_extensions.

    ``all`` and ``none`` as upstream reads them; a list (or a comma string) of extension name substrings.
    """
    if isinstance(value, str) and value.strip().lower() in ("all", "none"):
        return value.strip().lower(), None, None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        return None, None, "must be all, none or a non-empty list of extension names"
    tokens = [str(item).strip().lower() for item in items]
    bad = [t for t in tokens if not _TOKEN.match(t)]
    if bad:
        return None, None, "has items that are not extension names (letters, digits, _ . -): %s" % ", ".join(
            repr(b) for b in bad)
    return ",".join(tokens), tokens, None


def build_requires(pyproject_text):
    """[build-system].requires of a pyproject.toml ([] when it has none or is not TOML)."""
    try:
        return list((_toml(pyproject_text).get("build-system") or {}).get("requires") or [])
    except ValueError:
        return []


def rust_era(setup_py_text, workspace_text):
    """Whether the tree builds Rust extensions the way main does: a rust/ workspace and a setup.py that reads
    SGLANG_BUILD_RUST_EXTS (older trees had no setup.py hooks; their rust/ folder, if any, was the router)."""
    return bool(workspace_text) and RUST_ENV in (setup_py_text or "")


def toolchain_channel(text):
    """The channel of a rust-toolchain.toml (``[toolchain] channel``) or of a legacy one-line rust-toolchain."""
    if not text:
        return None
    try:
        data = _toml(text)
    except ValueError:
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        return line or None
    channel = (data.get("toolchain") or {}).get("channel")
    return str(channel) if channel else None


def version_tuple(text):
    """(major, minor, patch) of the first version number in TEXT ("rustc 1.95.0 (...)", "1.92"), or None."""
    found = _VERSION.search(text or "")
    if not found:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


def workspace_manifests(workspace_text):
    """The Cargo.toml files setup.py reads, as paths in the repository: rust/<member>/Cargo.toml for each
    workspace member and each of ``[workspace.metadata.sglang] extension-manifests``.

    Glob members (``crates/*``) are not expanded (no crate of SGLang's workspace uses one)."""
    data = _toml(workspace_text)
    workspace = data.get("workspace") or {}
    members = [m for m in (workspace.get("members") or []) if "*" not in m]
    extra = ((workspace.get("metadata") or {}).get("sglang") or {}).get("extension-manifests") or []
    paths = [os.path.normpath("rust/%s/Cargo.toml" % m) for m in members]
    paths += [os.path.normpath("rust/%s" % e) for e in extra]
    return [p for p in paths if not p.startswith("..")]


def rust_extensions(manifests):
    """[{name, crate, kind, torch}] declared by the crates' ``[package.metadata.sglang]``, sorted by crate as
    setup.py sorts them. MANIFESTS: {path: Cargo.toml text}. ``torch``: the crate builds against torch
    (``torch-compat-header``, the TreeCore extension)."""
    found = []
    for path in sorted(manifests):
        text = manifests[path]
        if not text:
            continue
        package = _toml(text).get("package") or {}
        meta = (package.get("metadata") or {}).get("sglang") or {}
        crate = package.get("name") or path
        if "python-bin" in meta:
            found.append({"name": str(meta["python-bin"]), "crate": crate, "kind": "bin", "torch": False})
        if "python-module" in meta:
            found.append({"name": str(meta["python-module"]), "crate": crate, "kind": "module",
                          "torch": "torch-compat-header" in meta})
    return sorted(found, key=lambda e: (e["crate"], e["kind"] != "bin"))


def _match(declared, tokens):
    matched, unmatched = set(), []
    for token in tokens:
        hits = {e["name"] for e in declared if token in e["name"].lower()}
        matched |= hits
        if not hits:
            unmatched.append(token)
    return [e for e in declared if e["name"] in matched], unmatched


def select(declared, pyproject_text, env_value, tokens):
    """(selected, unmatched tokens) as setup.py selects: the pyproject allowlist, then SGLANG_BUILD_RUST_EXTS."""
    found = _ALLOWLIST.search(pyproject_text or "")
    if found:
        declared, _unmatched = _match(declared, [t.lower() for t in re.findall(r'"([^"]*)"', found.group(1))])
    if env_value == "none":
        return [], []
    if env_value == "all":
        return list(declared), []
    return _match(declared, tokens)


def toolchain_environment(toolchain_dir, base_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"):
    """The environment cargo runs with: the toolchain's bin first on PATH; RUSTUP_HOME (and CARGO_HOME) when the
    directory is a rustup installation made with both set to it (it holds toolchains/)."""
    env = {"PATH": "%s/bin:%s" % (toolchain_dir.rstrip("/"), base_path)}
    if os.path.isdir(os.path.join(toolchain_dir, "toolchains")):
        env["RUSTUP_HOME"] = toolchain_dir
        env["CARGO_HOME"] = toolchain_dir
    return env


def _owner_problems(path):
    try:
        info = os.stat(path)
    except OSError as exc:
        return ["%s: %s" % (path, exc.strerror or exc)]
    problems = []
    if info.st_uid != 0:
        problems.append("%s is owned by uid %s, not root" % (path, info.st_uid))
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problems.append("%s is writable by group or others (mode %04o)" % (path, stat.S_IMODE(info.st_mode)))
    return problems


def check_toolchain(toolchain_dir, channel, run):
    """{dir, cargo, rustc, problems}: a toolchain the role may build with, or why not.

    Root-owned and not group/world-writable (the directory, bin/ and both tools, links followed), both tools
    answer --version, and both are at least the tree's channel when that is a version ("1.92");
    a named channel (stable, nightly-...) only needs working tools. RUN(argv, env) -> (rc, out, err).
    """
    result = {"dir": toolchain_dir, "cargo": None, "rustc": None, "problems": [],
              "environment": toolchain_environment(toolchain_dir)}
    problems = result["problems"]
    if not os.path.isdir(toolchain_dir):
        problems.append("%s does not exist" % toolchain_dir)
        return result
    for path in (toolchain_dir, os.path.join(toolchain_dir, "bin")):
        problems.extend(_owner_problems(path))
    wanted = version_tuple(channel) if channel and channel[0].isdigit() else None
    env = result["environment"]
    for tool in ("cargo", "rustc"):
        path = os.path.join(toolchain_dir, "bin", tool)
        if not os.path.exists(path):
            problems.append("%s does not exist" % path)
            continue
        problems.extend(_owner_problems(path))
        rc, out, err = run([path, "--version"], env)
        version = version_tuple(out) if rc == 0 else None
        if version is None:
            problems.append("%s --version failed (rc %s): %s" % (path, rc, (err or out).strip()[-300:]))
            continue
        result[tool] = "%d.%d.%d" % version
        if wanted and version < wanted:
            problems.append("%s is %s, older than the channel %s the tree pins" % (path, result[tool], channel))
    return result


def request_refusal(value, error):
    return ("sglang_build_rust_extensions=%r %s. Set it to all, none, or a list of names such as [grpc, "
            "multimodal]; nothing was changed." % (value, error))


def selection_refusal(value, unmatched, declared, commit):
    return ("sglang_build_rust_extensions=%r names no Rust extension of %s for %s; the tree declares %s. "
            "Fix the list (case-insensitive substrings of these names) or set none; nothing was changed." % (
                value, commit[:12], ", ".join(unmatched), ", ".join(e["name"] for e in declared) or "none"))


def toolchain_refusal(value, commit, channel, toolchain, selected, declared):
    without = [e["name"] for e in declared]
    return ("sglang_build_rust_extensions=%r asks for the Rust extensions %s of %s, built with cargo from the "
            "rust/ workspace; rust/rust-toolchain.toml pins channel %s. No usable toolchain at "
            "sglang_build_rust_toolchain_dir=%s: %s. Nothing was changed. Fix: set sglang_build_rust_extensions: "
            "none (SGLang runs without its optional extensions %s), or provide a Rust toolchain of channel %s or "
            "newer there, root-owned (for example as root: RUSTUP_HOME=%s CARGO_HOME=%s rustup-init -y "
            "--no-modify-path --profile minimal --default-toolchain %s), or point sglang_build_rust_toolchain_dir "
            "at one." % (
                value, ", ".join(e["name"] for e in selected), commit[:12], channel or "(none)", toolchain["dir"],
                "; ".join(toolchain["problems"]), ", ".join(without) or "(none)", channel or "stable",
                toolchain["dir"], toolchain["dir"], channel or "stable"))


def torch_pin_refusal(ref, commit, python, pins, held):
    """PINS: [(requirement, installed version)] the held torch family contradicts."""
    return ("sglang_build_ref=%s (commit %s) declares %s in python/pyproject.toml, and %s holds %s "
            "(sglang_build_torch_install keeps an installed torch). Nothing was changed. Choose: let the role "
            "install the release's torch (sglang_build_torch_install: replace, with sglang_build_torch_version "
            "and sglang_build_torch_index_url for the CUDA build you want), build a ref whose pyproject.toml "
            "declares the torch you hold (sglang_build_ref), or keep your torch against SGLang's pin "
            "(sglang_build_torch_pin_mismatch: hold)." % (
                ref, commit[:12], ", ".join(p[0] for p in pins), python,
                ", ".join("%s %s" % (name, version) for name, version in sorted(held.items()))))
