# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Everything the sglang_build role reads on a no-op path, in one call (issue 20), and its decisions.

The reads the role made task by task: dpkg's state of the OS packages, the target interpreter, the ref
(one `git ls-remote` for a branch or tag; a full commit id needs no remote, a short one is looked up in the
local clone), the commit's build.json, the state file and its directory, the environment's site-packages
and the .pth file there, the `current` link. `run` is the command runner (AnsibleModule.run_command or a
test's); paths are real paths of the host (tests give a tmp tree).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile

from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_rules as rules
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_upstream as upstream
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_dependencies as deps
from ansible_collections.gpufleet.llm_server.plugins.module_utils.package_state import missing_packages, read_status

PTH_NAME = "gpufleet-sglang.pth"
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


class ReadError(Exception):
    """A read that failed in a way the role must not guess past (git unreachable...): the module fails with it."""


def layout(build_dir):
    root = build_dir.rstrip("/")
    return {"root": root, "repo": root + "/repo.git", "builds": root + "/builds", "current": root + "/current"}


def read_json(path):
    """(parsed or None, error or None); a missing file is (None, None)."""
    raw = hs.read_file(path)
    if raw is None:
        return None, None
    try:
        return json.loads(raw.decode("utf-8")), None
    except ValueError as exc:
        return None, "not JSON: %s" % exc


def read_served(build_dir):
    """facts.yml's reads: the tree `current` points at (stat's lnk_source, a realpath) and its build.json."""
    current = layout(build_dir)["current"]
    info = hs.lstat(current)
    if info is None or not os.path.islink(current):
        return {"tree": None, "record": {}, "resources": [current]}
    tree = os.path.realpath(current)
    record, _error = read_json(tree + "/build.json")
    return {"tree": tree, "record": record if isinstance(record, dict) else {},
            "resources": [current, tree + "/build.json"]}


def resolve(params, paths, run, git):
    """(commit or None, refusal or None); raises ReadError when git itself fails."""
    ref = params["ref"]
    if rules.FULL_COMMIT.match(ref):
        return ref, None
    clone_exists = os.path.exists(paths["repo"] + "/config")
    if rules.COMMIT_LIKE.match(ref) and clone_exists and git:
        rc, out, _err = run([git, "--git-dir", paths["repo"], "rev-parse", "--verify", "--quiet", ref + "^{commit}"])
        if rc == 0 and rules.FULL_COMMIT.match(out.strip()):
            return out.strip(), None
    if not git:
        return None, None
    # As the git module: the clone's origin when there is a clone, else the URL (file:// for a path).
    if clone_exists:
        argv, remote = [git, "--git-dir", paths["repo"], "ls-remote", "origin"], "origin"
    else:
        remote = params["git_url"]
        if os.path.expanduser(remote).startswith("/"):
            remote = "file://" + os.path.expanduser(remote)
        argv = [git, "ls-remote", remote]
    rc, out, err = run(argv + rules.ls_remote_patterns(ref))
    if rc != 0:
        raise ReadError("git ls-remote %s failed (rc %s) while resolving sglang_build_ref=%s: %s" % (
            remote, rc, ref, (err or out).strip()))
    commit = rules.resolve_ref(ref, out)
    if not rules.COMMIT_LIKE.match(commit):
        return None, rules.ref_refusal(ref, params["git_url"])
    return commit, None


def read_state(params, run, which):
    """The whole read and the decisions. `which(name)` finds an executable (AnsibleModule.get_bin_path)."""
    paths = layout(params["dir"])
    result = {"layout": paths, "refusals": [], "needs": {}, "reasons": {}}
    needs, reasons, refusals = result["needs"], result["reasons"], result["refusals"]
    resources = []

    # OS packages: only where dpkg keeps its database (the role's Debian-family condition).
    requests = list(params["os_packages"] or [])
    status = read_status(params["dpkg_status"]) if requests and os.path.exists(params["dpkg_status"]) else None
    missing = missing_packages(requests, status)[0] if status is not None else []
    result["missing_packages"] = missing
    needs["os_packages"] = bool(missing)
    resources.extend({"kind": "package", "name": name} for name in requests if status is not None)

    python = params["python"]
    result["python_exists"] = os.path.exists(python)
    resources.append(python)
    needs["venv"] = bool(params["venv_create"]) and not result["python_exists"]
    if not result["python_exists"] and not params["venv_create"]:
        refusals.append(rules.interpreter_refusal(python, params["host"]))

    git = which("git")
    commit, refusal = resolve(params, paths, run, git)
    # git missing but about to be installed: prepare.yml installs it and reads again.
    needs["resolve"] = commit is None and refusal is None
    if needs["resolve"] and not ("git" in missing or git):
        refusals.append(rules.git_refusal(params["ref"]))
    if refusal:
        refusals.append(refusal)
    result["commit"] = commit
    tree = "%s/%s" % (paths["builds"], commit) if commit else None
    result["tree"] = tree

    marker = tree + "/build.json" if tree else None
    marker_exists = bool(marker) and os.path.isfile(marker)
    new = rules.is_new(commit, marker_exists)
    needs["build"] = new
    previous = {}
    if marker and not new:
        resources.append(marker)
        previous, _error = read_json(marker)
        previous = previous if isinstance(previous, dict) else {}
    result["previous"] = previous
    reasons["verify"] = rules.verify_reasons(new, previous, python, params["verify_modules"])
    needs["verify"] = bool(reasons["verify"])
    result["verified_environment"] = rules.verified_environment(previous)

    state_path = params["state_file"]
    state_file = hs.file_state(state_path)
    state, error = read_json(state_path)
    if error is None and state is not None and not isinstance(state, dict):
        error = "a JSON %s, not an object" % type(state).__name__
    if error:
        refusals.append(rules.state_file_refusal(state_path, error))
    state = state if isinstance(state, dict) else {}
    result["state"] = state
    reasons["state_file"] = rules.state_file_reasons(state, commit, state_file) if commit else ["commit unknown"]
    needs["state_file"] = bool(reasons["state_file"])
    state_dir = os.path.dirname(state_path)
    reasons["state_dir"] = hs.compare_directory({"mode": "0755"}, hs.file_state(state_dir))
    needs["state_dir"] = bool(reasons["state_dir"])
    resources.extend([state_dir, state_path])

    result["purelib"] = None
    reasons["pth"] = []
    if result["python_exists"]:
        rc, out, err = run([python, "-c", PURELIB])
        if rc != 0:
            raise ReadError("%s cannot tell its site-packages (rc %s): %s" % (python, rc, (err or out).strip()))
        result["purelib"] = out.strip()
        pth = os.path.join(result["purelib"], PTH_NAME)
        reasons["pth"] = hs.compare_file({"content": params["pth_content"], "mode": "0644"}, hs.file_state(pth))
        resources.append(pth)
    needs["pth"] = bool(reasons["pth"])

    current = paths["current"]
    current_info = hs.lstat(current)
    is_link = current_info is not None and os.path.islink(current)
    if current_info is not None and not is_link:
        refusals.append(rules.current_refusal(current))
    # stat's lnk_source, which the role compared with the tree: the link's realpath
    result["current_target"] = os.path.realpath(current) if is_link else None
    needs["switch"] = bool(tree) and (result["current_target"] or "") != tree
    resources.append(current)

    result["upstream"] = {}
    if new and commit and git and params.get("upstream_checks", True):
        result["upstream"] = read_upstream(params, paths, run, git, commit, result, refusals)

    result["resources"] = resources
    return result


def _runner_env(run):
    """RUN(argv, env): the module's runner takes an environment; a plain test runner gets it merged in."""
    def call(argv, env=None):
        try:
            return run(argv, env) if env else run(argv)
        except TypeError:
            return run(argv)
    return call


def _remote(params):
    remote = params["git_url"]
    if os.path.expanduser(remote).startswith("/"):
        remote = "file://" + os.path.expanduser(remote)
    return remote


def _archived(run, git, remote, ref, name):
    """NAME at REF read with `git archive --remote` (git:// file:// ssh; GitHub's https does not serve it):
    (True, text or None when the tree has no such file) or (False, None) when the remote does not answer."""
    rc, out, err = run([git, "archive", "--remote", remote, "--format=tar", ref, "--", name])
    if rc != 0:
        return ("did not match any files" in (err or "") or "pathspec" in (err or "")), None
    try:
        with tarfile.open(fileobj=io.BytesIO(out.encode("utf-8", "surrogateescape"))) as tar:
            member = tar.extractfile(name)
            return True, member.read().decode("utf-8") if member else None
    except (tarfile.TarError, KeyError, UnicodeError):
        return False, None


def tree_files(params, paths, run, git, commit, names):
    """{path: text or None} of NAMES at COMMIT, before anything of the role's is written: from the role's clone
    when it has the commit; else `git archive --remote` of the ref (a local or ssh remote answers in
    milliseconds); else a one-commit shallow, blob-less fetch into a temporary repository removed at once (GitHub).
    Returns (files, source) or raises ReadError."""
    repo = paths["repo"]
    if os.path.exists(repo + "/config") and run([git, "--git-dir", repo, "cat-file", "-e", commit + "^{commit}"])[0] == 0:
        return {name: _show(run, git, repo, commit, name) for name in names}, "clone"
    remote = _remote(params)
    # upload-archive serves refs, not bare commit ids (uploadArchive.allowUnreachable)
    if not rules.FULL_COMMIT.match(params["ref"]):
        files, answered = {}, True
        for name in names:
            answered, files[name] = _archived(run, git, remote, params["ref"], name)
            if not answered:
                break
        if answered:
            return files, "git archive"
    scratch = tempfile.mkdtemp(prefix="gpufleet-sglang-read-")
    try:
        wanted = commit if rules.FULL_COMMIT.match(params["ref"]) else params["ref"]
        for argv in ([git, "init", "-q", "--bare", scratch],
                     [git, "--git-dir", scratch, "remote", "add", "origin", remote],
                     [git, "--git-dir", scratch, "fetch", "-q", "--depth", "1", "--no-tags", "--filter=blob:none",
                      "origin", wanted]):
            rc, out, err = run(argv)
            if rc != 0:
                raise ReadError("Reading python/pyproject.toml and rust/ of sglang_build_ref=%s (%s) before the build "
                                "failed: git %s (rc %s): %s" % (params["ref"], commit[:12], " ".join(argv[3:]), rc,
                                                                (err or out).strip()))
        return {name: _show(run, git, scratch, commit, name) for name in names}, "shallow fetch"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _show(run, git, repo, commit, name):
    rc, out, _err = run([git, "--git-dir", repo, "show", "%s:%s" % (commit, name)])
    return out if rc == 0 else None


def read_upstream(params, paths, run, git, commit, result, refusals):
    """The new commit's build files: its Rust extensions and toolchain pin (issue 32), its declared torch
    against the held one; the refusals of what cannot be built, before any change."""
    files, source = tree_files(params, paths, run, git, commit,
                               ["python/pyproject.toml", "python/setup.py", "rust/Cargo.toml",
                                "rust/rust-toolchain.toml"])
    info = {"source": source, "rust": None, "torch": None}
    pyproject = files["python/pyproject.toml"] or ""
    value = params.get("rust_extensions", "none")
    env_value, tokens, error = upstream.rust_request(value)
    if error:
        refusals.append(upstream.request_refusal(value, error))
    elif upstream.rust_era(files["python/setup.py"], files["rust/Cargo.toml"]):
        manifests, _source = tree_files(params, paths, run, git, commit,
                                        upstream.workspace_manifests(files["rust/Cargo.toml"]))
        declared = upstream.rust_extensions(manifests)
        selected, unmatched = upstream.select(declared, pyproject, env_value, tokens)
        channel = upstream.toolchain_channel(files["rust/rust-toolchain.toml"])
        rust = {"env": env_value, "channel": channel, "declared": [e["name"] for e in declared],
                "selected": [e["name"] for e in selected],
                "without": [e["name"] for e in declared if e not in selected],
                "torch": any(e["torch"] for e in selected), "toolchain": None,
                # what the build step installs into the environment (the torch family is held, never among them)
                "build_requires": [r for r in upstream.build_requires(pyproject)
                                   if deps.requirement_name(r) not in _families(params)]}
        info["rust"] = rust
        if unmatched:
            refusals.append(upstream.selection_refusal(value, unmatched, declared, commit))
        elif selected:
            toolchain = upstream.check_toolchain(params.get("rust_toolchain_dir") or "/opt/gpufleet/rust", channel,
                                                 _runner_env(run))
            rust["toolchain"] = toolchain
            if toolchain["problems"]:
                refusals.append(upstream.toolchain_refusal(value, commit, channel, toolchain, selected, declared))
    info["torch"] = read_torch_pins(params, run, commit, pyproject, refusals) if pyproject else None
    return info


def _families(params):
    return [deps.canonical(n) for n in params.get("torch_packages") or ["torch", "torchvision", "torchaudio"]]


def read_torch_pins(params, run, commit, pyproject, refusals):
    """The commit's torch-family requirements against what the interpreter holds; refused when they contradict
    and the role would keep the held torch (issue 32)."""
    python = params["python"]
    families = _families(params)
    try:
        _name, declared = deps.declared_requirements(pyproject, params.get("extras") or [])
    except deps.DependencyError:
        return None  # the dependency step reports it with its fix
    pins = [r for r in declared if deps.requirement_name(r) in families]
    if not pins or not os.path.exists(python):
        return {"declared": pins, "held": {}, "contradicted": []}
    rc, out, _err = run([python, "-c", deps.PROBE, json.dumps({"requirements": pins, "packages": families})])
    try:
        probe = json.loads(out) if rc == 0 else None
    except ValueError:
        probe = None
    if probe is None:
        return {"declared": pins, "held": {}, "contradicted": []}
    held = {name: info["version"] for name, info in probe["held"].items()}
    contradicted = [(e["requirement"], e["installed"]) for e in probe["requirements"]
                    if e["applies"] and e["installed"] is not None and not e["satisfied"] and not e["error"]]
    if (contradicted and params.get("torch_install", "if-missing") != "replace"
            and params.get("torch_pin_mismatch", "refuse") == "refuse"):
        refusals.append(upstream.torch_pin_refusal(params["ref"], commit, python, contradicted, held))
    return {"declared": pins, "held": held, "contradicted": [c[0] for c in contradicted]}
