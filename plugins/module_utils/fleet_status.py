# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One read-only look at an LLM server host, desired against actual (issue 35, playbooks/status.yml).

read(params, run) reads everything in one module run and judges each concern: driver, cuda, sglang, patch,
unit, restart, model. Each concern is {'state': 'ok'|'drift'|'pending'|'unknown', 'detail': [...], ...facts}.
Nothing here writes: files are opened for reading, commands are `systemctl show` and `git` reads
(rev-parse in the local clone, ls-remote for a branch or tag: no fetch, no pull). Standard library only
(the host's system Python); the plan and the outputs are worked out on the controller (plugins/filter).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest as mm
from ansible_collections.gpufleet.llm_server.plugins.module_utils import python_source_patch as psp
from ansible_collections.gpufleet.llm_server.plugins.module_utils import restart_marker as rm
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_state as build_state
from ansible_collections.gpufleet.llm_server.plugins.module_utils import systemd_credential as sc

CONCERNS = ("driver", "cuda", "sglang", "patch", "unit", "restart", "model")
STATES = ("ok", "drift", "pending", "unknown")
# Every package of an NVIDIA driver stack, whichever source and branch (nvidia_driver's vars: stack patterns).
DRIVER_PACKAGE = re.compile(r"^(nvidia-|libnvidia-|libcuda1|cuda-drivers|firmware-nvidia-gsp|xserver-xorg-video-nvidia)")
# Packages of the driver stack that do not carry the driver's version.
DRIVER_UNVERSIONED = re.compile(r"^(nvidia-driver-pinning-|nvidia-kernel-source$|nvidia-kernel-common$)")
SHOW_PROPERTIES = ("LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload",
                   "ActiveEnterTimestamp", "ActiveEnterTimestampMonotonic", "ExecMainStartTimestamp", "NRestarts",
                   "FragmentPath")
OPEN_MODULE = "Open Kernel Module"


def concern(state, detail=None, **facts):
    out = {"state": state, "detail": list(detail or [])}
    out.update(facts)
    return out


def upstream_version(version):
    """'1:595.71.05-1ubuntu1' -> '595.71.05'."""
    version = (version or "").split(":", 1)[-1]
    return re.sub(r"-[^-]*$", "", version)


# -- driver ----------------------------------------------------------------------------------------
def loaded_driver(proc_version_text, sys_version_text):
    """({'version', 'flavor'} or None) of the kernel module now loaded."""
    if sys_version_text and sys_version_text.strip():
        version = sys_version_text.strip()
    else:
        match = re.search(r"NVRM version:.*?\s([0-9]+(?:\.[0-9]+)+)\s", proc_version_text or "")
        version = match.group(1) if match else None
    if not version:
        return None
    flavor = None
    if proc_version_text:
        flavor = "open" if OPEN_MODULE in proc_version_text else "proprietary"
    return {"version": version, "flavor": flavor}


def parse_preferences(text):
    """apt preferences text -> [{'packages': [...], 'pin': str, 'priority': int or None}]."""
    out = []
    for block in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "package" in fields and "pin" in fields:
            try:
                priority = int(fields.get("pin-priority", ""))
            except ValueError:
                priority = None
            out.append({"packages": fields["package"].split(), "pin": fields["pin"], "priority": priority})
    return out


def driver_pins(preference_files):
    """Version pins of driver packages: [{'file', 'packages', 'version'}] from {path: text}."""
    pins = []
    for path in sorted(preference_files):
        for stanza in parse_preferences(preference_files[path]):
            if not stanza["pin"].startswith("version "):
                continue
            names = [name for name in stanza["packages"] if DRIVER_PACKAGE.match(name.lstrip("*"))
                     or "nvidia" in name]
            if names:
                pins.append({"file": path, "packages": names, "version": stanza["pin"][len("version "):].strip()})
    return pins


def judge_driver(packages, loaded, pins, want):
    """packages: parse_dpkg_status_file's dict; loaded: loaded_driver(); pins: driver_pins();
    want: {'branch', 'version', 'flavor', 'hold'}."""
    stack = {name: p for name, p in packages.items() if p["state"] == "installed" and DRIVER_PACKAGE.match(name)}
    versioned = {name: upstream_version(p["version"]) for name, p in stack.items()
                 if not DRIVER_UNVERSIONED.match(name)}
    versions = sorted(set(versioned.values()))
    installed = max(versions, key=lambda v: sum(1 for x in versioned.values() if x == v)) if versions else None
    names = " ".join(sorted(stack))
    flavor = None
    if stack:
        flavor = "open" if re.search(r"(-open\b|kernel-open|open-dkms)", names) else "proprietary"
    held = sorted(name for name, p in stack.items() if p["want"] == "hold")
    pinning = sorted(name for name in stack if name.startswith("nvidia-driver-pinning-"))
    facts = {"installed": installed, "versions": versions, "flavor": flavor, "loaded": loaded, "held": held,
             "pinning_packages": pinning, "version_pins": pins, "packages": len(stack)}
    detail, pending = [], []
    branch = str(want.get("branch") or "")
    if not stack:
        detail.append("no NVIDIA driver package is installed (wanted branch %s)" % branch)
        return concern("drift", detail, reinstall=True, reboot_pending=False, **facts)
    if len(versions) > 1:
        detail.append("mixed stack: %s" % ", ".join(
            "%s (%s)" % (v, ", ".join(sorted(n for n, x in versioned.items() if x == v))[:120]) for v in versions))
    if branch and installed and installed.split(".")[0] != branch:
        detail.append("branch %s installed, inventory wants %s (nvidia_driver_branch)" % (installed.split(".")[0], branch))
    wanted_version = upstream_version(want.get("version") or "")
    if wanted_version and installed != wanted_version:
        detail.append("version %s installed, inventory wants %s (nvidia_driver_version)" % (installed, wanted_version))
    if want.get("flavor") and flavor != want["flavor"]:
        detail.append("flavour %s installed, inventory wants %s (nvidia_driver_flavor)" % (flavor, want["flavor"]))
    # Everything so far changes the installed driver: a deploy installs another kernel module, then reboots.
    facts["reinstall"] = bool(detail)
    for pin in pins:
        if installed and not fnmatch.fnmatchcase(installed, upstream_version(pin["version"]).rstrip("*") + "*") \
                and not fnmatch.fnmatchcase(installed, pin["version"]):
            detail.append("%s pins %s to version %s, not the installed %s" % (
                pin["file"], " ".join(pin["packages"]), pin["version"], installed))
    if want.get("hold", True):
        unheld_lock = not pinning and len(held) < len(stack)
        if unheld_lock:
            detail.append("not locked: no nvidia-driver-pinning package and %s not held (nvidia_driver_hold)" % ", ".join(
                sorted(set(stack) - set(held)))[:200])
        for name in pinning:
            if branch and name != "nvidia-driver-pinning-" + branch:
                detail.append("%s installed, branch %s wanted" % (name, branch))
    if loaded and installed and loaded["version"] != installed:
        pending.append("loaded kernel module %s, installed %s: a reboot is pending" % (loaded["version"], installed))
    if loaded and loaded.get("flavor") and flavor and loaded["flavor"] != flavor:
        pending.append("loaded %s module, installed %s: a reboot is pending" % (loaded["flavor"], flavor))
    facts["reboot_pending"] = bool(pending)
    if detail:
        return concern("drift", detail + pending, **facts)
    return concern("pending" if pending else "ok", pending, **facts)


# -- CUDA ------------------------------------------------------------------------------------------
def judge_cuda(packages, want_version):
    toolkits = sorted("%s %s" % (name, p["version"]) for name, p in packages.items()
                      if p["state"] == "installed" and re.match(r"^cuda-toolkit-[0-9]+-[0-9]+$", name))
    facts = {"installed": toolkits, "wanted": want_version}
    if not want_version:
        return concern("ok" if toolkits else "unknown", [] if toolkits else ["no CUDA toolkit wanted or installed"], **facts)
    package = "cuda-toolkit-" + str(want_version).replace(".", "-")
    if not any(t.split()[0] == package for t in toolkits):
        return concern("drift", ["%s is not installed (cuda_toolkit_version=%s); installed: %s" % (
            package, want_version, ", ".join(toolkits) or "none")], **facts)
    return concern("ok", **facts)


# -- SGLang build and SM120 patch ------------------------------------------------------------------
def judge_sglang(build_dir, ref, git_url, python, run, git):
    paths = build_state.layout(build_dir)
    served = build_state.read_served(build_dir)
    tree, record = served["tree"], served["record"]
    served_commit = record.get("commit") or (os.path.basename(tree) if tree else None)
    facts = {"served_tree": tree, "served_commit": served_commit, "built_at": record.get("built_at"),
             "build_seconds": record.get("build_seconds"), "version": record.get("version"),
             "verified": record.get("verified")}
    detail, unknown = [], []
    try:
        commit, refusal = build_state.resolve({"ref": ref, "git_url": git_url}, paths, run, git)
    except build_state.ReadError as exc:
        # the remote did not answer: nothing to judge the served commit against (not a drift of the host)
        commit, refusal = None, None
        unknown.append(str(exc))
    facts["ref"] = ref
    facts["ref_commit"] = commit
    want_tree = "%s/%s" % (paths["builds"], commit) if commit else None
    facts["ref_built"] = bool(want_tree and os.path.isfile(want_tree + "/build.json"))
    if want_tree and facts["ref_built"]:
        want_record, _error = build_state.read_json(want_tree + "/build.json")
        facts["ref_build_seconds"] = (want_record or {}).get("build_seconds")
    if tree is None:
        detail.append("nothing is served: %s is not a link to a build" % paths["current"])
    elif not record:
        detail.append("%s has no build.json: the served build never completed" % tree)
    if refusal:
        detail.append("sglang_build_ref=%s: %s" % (ref, refusal))
    elif commit is None and not unknown:
        unknown.append("sglang_build_ref=%s could not be resolved here (no git)" % ref)
    elif commit and served_commit and commit != served_commit:
        detail.append("serves %s, sglang_build_ref=%s is %s now (%s)" % (
            served_commit[:12], ref, commit[:12], "built, not served" if facts["ref_built"] else "not built"))
    verified = record.get("verified") if isinstance(record.get("verified"), dict) else None
    if tree and record and not verified:
        detail.append("the served build has no import check in its build.json")
    elif verified and python and verified.get("python") != python:
        detail.append("the import check ran with %s, the server runs %s" % (verified.get("python"), python))
    if detail:
        return concern("drift", detail + unknown, **facts)
    return concern("unknown" if unknown else "ok", unknown, **facts)


def judge_patch(source_dir, patches, required_keys):
    """The SM120 keys in the tables the served tree's code reads (python_source_patch's resolution)."""
    facts = {"source_dir": source_dir, "tables": {}}
    if not source_dir or not os.path.isdir(source_dir):
        return concern("drift", ["no served SGLang tree at %s" % source_dir], **facts)
    detail = []
    required = [str(k) for k in required_keys]
    for patch in patches:
        candidates = [(os.path.join(source_dir, patch["file"]), patch["symbol"])]
        for alt in patch.get("alternatives") or []:
            candidates.append((os.path.join(source_dir, alt.get("file") or patch["file"]), alt["symbol"]))
        try:
            _i, _reader, _sym, target, resolved, _chain, data = psp.resolve_read_target(
                candidates, psp._read_file, os.path.exists)
            keys = [str(k) for k in psp.listed_keys(data, resolved, target)["literal_keys"]]
        except psp.PatchError as exc:
            detail.append("%s: %s" % (patch["name"], exc))
            continue
        facts["tables"][patch["name"]] = {"path": target, "symbol": resolved, "keys": keys}
        missing = [k for k in required if k not in keys]
        if missing:
            detail.append("%s (%s in %s) lacks key(s) %s" % (patch["name"], resolved, target, ", ".join(missing)))
    return concern("drift" if detail else "ok", detail, **facts)


# -- unit and restart ------------------------------------------------------------------------------
# Facts of the unit concern only the controller uses (the comparison with the rendering from the inventory,
# plugins/module_utils/fleet_plan.py): dropped from the report once used.
UNIT_WORK_FACTS = ("installed_text", "env_text", "known_good_detail", "state_detail", "pending_detail")


def _text(data):
    return None if data is None else data.decode("utf-8", "replace")


def compare_rendered(unit_path, installed_text, rendered_unit, env_path=None, env_text=None, rendered_env=None):
    """Detail lines of the unit (and its environment file) against what the inventory renders today (what
    `make deploy` would write): [] when both are the same. env_text None: the file could not be read (not judged)."""
    detail = []
    if installed_text != rendered_unit:
        detail.append("%s differs from the unit rendered from the inventory%s" % (
            unit_path, _first_difference(installed_text.encode("utf-8"), rendered_unit.encode("utf-8"))))
    if rendered_env is not None and env_path:
        if env_text is None and not os.path.lexists(env_path):
            detail.append("%s is not installed" % env_path)
        elif env_text is not None and env_text != rendered_env:
            detail.append("%s differs from the environment file rendered from the inventory%s" % (
                env_path, _first_difference(env_text.encode("utf-8"), rendered_env.encode("utf-8"))))
    return detail


def unit_verdict(facts, file_detail, state_detail, pending_detail, notes=()):
    detail = list(file_detail) + list(state_detail)
    if detail:
        return concern("drift", detail + list(pending_detail), **facts)
    return concern("pending" if pending_detail else "ok", list(pending_detail) + list(notes), **facts)


def judge_unit(unit_path, wanted_content, known_good_path, show, env_path=None, wanted_env=None):
    """The unit file against wanted_content (rendered from the inventory) or, without it, the known-good snapshot,
    and systemd's view of it. The facts keep what rejudge_unit needs to compare again on the controller."""
    installed = hs.read_file(unit_path)
    env = hs.read_file(env_path) if env_path else None
    facts = {"path": unit_path, "installed_sha256": None if installed is None else hashlib.sha256(installed).hexdigest(),
             "active_state": show.get("ActiveState"), "sub_state": show.get("SubState"),
             "active_since": show.get("ActiveEnterTimestamp") or None, "unit_file_state": show.get("UnitFileState"),
             "need_daemon_reload": show.get("NeedDaemonReload") == "yes", "restarts": show.get("NRestarts"),
             "env_path": env_path, "installed_text": _text(installed), "env_text": _text(env)}
    if installed is None:
        facts.update(known_good_detail=[], state_detail=[], pending_detail=[], compared_with=None)
        return concern("drift", ["%s is not installed" % unit_path], **facts)
    pending, state_detail, known_detail = [], [], []
    known = hs.read_file(known_good_path) if known_good_path else None
    facts["known_good_path"] = known_good_path if known is not None else None
    if known is not None and known != installed:
        known_detail.append("%s differs from the known-good snapshot %s%s" % (
            unit_path, known_good_path, _first_difference(installed, known)))
    if facts["need_daemon_reload"]:
        pending.append("systemd still runs the unit loaded before the file changed (NeedDaemonReload=yes)")
    if show.get("ActiveState") not in ("active", "activating", "reloading"):
        state_detail.append("%s is %s (%s)" % (os.path.basename(unit_path), show.get("ActiveState"), show.get("SubState")))
    facts.update(known_good_detail=known_detail, state_detail=state_detail, pending_detail=pending)
    if wanted_content is not None:
        facts["compared_with"] = "rendered from the inventory"
        file_detail = compare_rendered(unit_path, facts["installed_text"], wanted_content, env_path, facts["env_text"],
                                       wanted_env)
    else:
        facts["compared_with"] = facts["known_good_path"]
        file_detail = known_detail
    return unit_verdict(facts, file_detail, state_detail, pending)


def rejudge_unit(unit, rendered):
    """On the controller: the module's unit concern judged again against the unit (and environment file) rendered
    from today's inventory - rendered: {'unit': text, 'env': text or None} or {'unit': None, 'reason': why not}
    (the known-good comparison stays, and the detail says why). The file texts are dropped from the result."""
    facts = {k: v for k, v in unit.items() if k not in ("state", "detail") + UNIT_WORK_FACTS}
    if "installed_text" not in unit:  # not host_status's unit concern (an older result): as it is
        return unit
    if unit.get("installed_text") is None:
        return concern(unit["state"], unit["detail"], **facts)
    if facts.get("compared_with") == "rendered from the inventory":  # the module compared already (unit_content)
        return concern(unit["state"], unit["detail"], **facts)
    notes = []
    rendered = rendered if isinstance(rendered, dict) else {}
    if isinstance(rendered.get("unit"), str):
        facts["compared_with"] = "rendered from the inventory"
        facts["env_compared"] = isinstance(rendered.get("env"), str) and unit.get("env_text") is not None
        file_detail = compare_rendered(unit["path"], unit["installed_text"], rendered["unit"], unit.get("env_path"),
                                       unit.get("env_text"), rendered.get("env"))
    else:
        file_detail = list(unit.get("known_good_detail") or [])
        facts["render_error"] = rendered.get("reason") or "not rendered"
        notes.append("not rendered from the inventory (%s): compared with %s" % (
            facts["render_error"], ("the known-good snapshot " + facts["known_good_path"]) if facts.get("known_good_path")
            else "nothing (no known-good snapshot)"))
        if file_detail:
            file_detail = file_detail + notes
            notes = []
    return unit_verdict(facts, file_detail, unit.get("state_detail") or [], unit.get("pending_detail") or [], notes)


def _first_difference(have, want):
    have_lines, want_lines = have.decode("utf-8", "replace").splitlines(), want.decode("utf-8", "replace").splitlines()
    for number, (a, b) in enumerate(zip(have_lines, want_lines), 1):
        if a != b:
            return " (line %d: %r, wanted %r)" % ((number,) + _excerpts(a, b))
    if len(have_lines) != len(want_lines):
        number = min(len(have_lines), len(want_lines)) + 1
        extra = have_lines[number - 1] if len(have_lines) > len(want_lines) else want_lines[number - 1]
        return " (line %d %s: %r)" % (number, "added" if len(have_lines) > len(want_lines) else "missing", extra[:80])
    return ""


def _excerpts(a, b, width=100):
    """The two lines whole when short, else each from a little before their first differing character (a long
    ExecStart= differs in one flag far to the right)."""
    if max(len(a), len(b)) <= width:
        return a, b
    column = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, column - 40)
    # from the start of the word (the flag) the difference is in
    while start > 0 and a[start - 1] != " ":
        start -= 1
        if column - start > 80:
            break

    def cut(text):
        return ("..." if start else "") + text[start:start + width] + ("..." if len(text) > start + width else "")
    return cut(a), cut(b)


def judge_restart(marker_path, unit):
    entries = rm.read(marker_path) if marker_path else []
    reasons = [e.get("reason") for e in entries if isinstance(e, dict)]
    facts = {"marker": marker_path, "marker_present": bool(marker_path and os.path.exists(marker_path)),
             "reasons": reasons}
    detail = ["restart marker %s: %s" % (marker_path, "; ".join(str(r) for r in reasons) or "(empty)")] \
        if facts["marker_present"] else []
    if unit.get("need_daemon_reload"):
        detail.append("the unit file changed since systemd loaded it")
    return concern("pending" if detail else "ok", detail, **facts)


# -- model -----------------------------------------------------------------------------------------
def judge_model(model_path, record_dir, hashes=False):
    facts = {"path": model_path, "bytes_wanted": 0, "bytes_present": 0, "bytes_missing": 0, "files": 0,
             "problems": []}
    if not model_path:
        return concern("unknown", ["the profile names no model_path"], **facts)
    try:
        record = mm.read_record(model_path, record_dir)
    except mm.ManifestError as exc:
        return concern("drift", [str(exc)], **facts)
    if record is None:
        if not os.path.isdir(model_path):
            return concern("drift", ["%s does not exist and has no record" % model_path], **facts)
        return concern("unknown", ["%s has no record in %s (model_download writes it)" % (model_path, record_dir)],
                       **facts)
    files = record["files"]
    facts["files"] = len(files)
    facts["bytes_wanted"] = sum(entry["size"] for entry in files.values())
    problems = mm.check_files(model_path, files)
    # 'changed' alone (same size, new inode or times) is no drift for status: the next deploy re-hashes it.
    real = [p for p in problems if p["reason"] != "changed"]
    missing = 0
    for problem in real:
        have = problem["have"] or 0
        missing += problem["want"] if problem["reason"] != "size" or have > problem["want"] else problem["want"] - have
    if hashes:
        for name in sorted(files):
            if any(p["path"] == name for p in real) or not files[name].get("sha256"):
                continue
            digest = hashlib.sha256()
            with open(os.path.join(model_path, name), "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() != files[name]["sha256"]:
                real.append({"path": name, "reason": "sha256", "have": None, "want": files[name]["size"]})
                missing += files[name]["size"]
    facts["problems"] = real[:20]
    facts["bytes_missing"] = missing
    facts["bytes_present"] = facts["bytes_wanted"] - missing
    if real:
        return concern("drift", ["%s: %s (%d bytes to download)" % (model_path, mm.describe(
            [{"path": p["path"], "reason": p["reason"], "have": p["have"], "want": p["want"]} for p in real]), missing)],
            **facts)
    return concern("ok", **facts)


# -- the whole read --------------------------------------------------------------------------------
def read_preferences(root_files, root_dirs):
    found = {}
    for path in root_files:
        data = hs.read_file(path)
        if data is not None:
            found[path] = data.decode("utf-8", "replace")
    for directory in root_dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            data = hs.read_file(os.path.join(directory, name))
            if data is not None:
                found[os.path.join(directory, name)] = data.decode("utf-8", "replace")
    return found


def read_record(path, key):
    """A JSON record's figure (sglang_service's start-to-ready, nvidia_driver's reboot): {'path', 'seconds',
    'recorded', 'error'}; seconds None when there is none."""
    record, error = build_state.read_json(path) if path else (None, None)
    seconds = record.get(key) if isinstance(record, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        if seconds is not None and error is None:
            error = "%s is not a number of seconds" % key
        seconds = None
    return {"path": path, "seconds": seconds, "recorded": record.get("recorded") if isinstance(record, dict) else None,
            "error": error}


def read_deployment(path):
    record, error = build_state.read_json(path)
    if not isinstance(record, dict):
        return {"path": path, "present": False, "error": error}
    return {"path": path, "present": True, "profile": record.get("profile"), "sglang_commit": record.get("sglang_commit"),
            "generated": record.get("generated"), "driver_version": record.get("driver_version"),
            "cuda_version": record.get("cuda_version")}


def read(params, run, which):
    """The whole read. params: the module's options; run(argv) -> (rc, out, err); which(name) -> path or None."""
    status_text = hs.read_file(params["dpkg_status"])
    packages = hs.parse_dpkg_status_file(status_text.decode("utf-8", "replace")) if status_text is not None else {}
    procfs, sysfs = params["procfs_root"], params["sysfs_root"]
    proc_version = hs.read_file(os.path.join(procfs, "driver/nvidia/version"))
    sys_version = hs.read_file(os.path.join(sysfs, "module/nvidia/version"))
    loaded = loaded_driver(proc_version.decode("utf-8", "replace") if proc_version else None,
                           sys_version.decode("utf-8", "replace") if sys_version else None)
    pins = driver_pins(read_preferences(params["apt_preferences"], params["apt_preferences_dirs"]))
    driver = judge_driver(packages, loaded, pins, params["driver"])
    if status_text is None:
        driver = concern("unknown", ["%s cannot be read" % params["dpkg_status"]])

    cuda = judge_cuda(packages, params["cuda_version"])
    sglang = judge_sglang(params["build_dir"], params["ref"], params["git_url"], params["python"], run, which("git"))
    source = sglang["served_tree"] + "/src/python/sglang" if sglang["served_tree"] else None
    patch = judge_patch(source, params["patches"], params["required_keys"])

    unit_path = os.path.join(params["unit_dir"], params["unit_name"])
    show = {}
    systemctl = which("systemctl")
    if systemctl:
        rc, out, _err = run([systemctl, "show", "--no-pager"] + ["--property=" + p for p in SHOW_PROPERTIES]
                            + ["--", params["unit_name"]])
        if rc == 0:
            show = (hs.parse_systemctl_show(out) or [{}])[0]
    known_good = os.path.join(params["known_good_dir"], params["unit_name"]) if params["known_good_dir"] else None
    unit = judge_unit(unit_path, params["unit_content"], known_good, show, params.get("env_file"),
                      params.get("env_content"))
    restart = judge_restart(params["restart_marker"], unit)
    model = judge_model(params["model_path"], params["model_record_dir"], params["hashes"])
    return {"concerns": {"driver": driver, "cuda": cuda, "sglang": sglang, "patch": patch, "unit": unit,
                         "restart": restart, "model": model},
            "deployment": read_deployment(params["deployment_record"]),
            "records": {"start_to_ready": read_record(params.get("start_record"), "start_to_ready_s"),
                        "reboot": read_record(params.get("reboot_record"), "reboot_s")},
            "credentials": credential_format(params.get("credential_encrypt"), run, which)}


def credential_format(encrypt, run, which):
    """How systemd_credential would store a credential on this host now (its own choice, read-only):
    {'format', 'directive', 'error'}; the unit's LoadCredential lines follow it."""
    systemctl = which("systemctl")
    version = None
    if systemctl:
        rc, out, _err = run([systemctl, "--version"])
        version = sc.systemd_version(out) if rc == 0 else None
    fmt, error = sc.choose_format(encrypt or "auto", version, bool(which("systemd-creds")))
    return {"format": fmt, "error": error,
            "directive": {"encrypted": "LoadCredentialEncrypted", "plain": "LoadCredential"}.get(fmt)}
