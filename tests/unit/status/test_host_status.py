"""host_status (plugins/module_utils/fleet_status.py) on real files in tmp_path: dpkg databases built from the
recorded stanzas of tests/support/apt_repos (tests/unit/driver/dpkg_fixtures.py), SGLang 0.5.10.post1's real
device_communicators files from PyPI (patched with python_source_patch, as the role does), model records written
by model_manifest's own format, and the module run as Ansible runs it (run_module_file)."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_status as fs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest as mm
from ansible_collections.gpufleet.llm_server.plugins.module_utils import python_source_patch as psp
from support.ansible_harness import run_module_file
from support.pypi import download

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "driver"))
import dpkg_fixtures as fx  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
PATCH_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_sm120_patch" / "defaults" / "main.yml").read_text())
PATCHES = PATCH_DEFAULTS["sglang_sm120_patch_patches"]
COMMIT = "4f2a" + "0" * 36
OTHER = "9b1c" + "1" * 36
COMM = "srt/distributed/device_communicators"
CUDA_STANZA = "Package: cuda-toolkit-13-0\nStatus: install ok installed\nArchitecture: amd64\nVersion: 13.0.2-1\n"
OPEN_580 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.173.02  Release Build  "
            "(dvs-builder@U22-I3-AE18-23-3)  Wed Nov 26 01:04:42 UTC 2025\nGCC version:  gcc version 13.3.0\n")


@pytest.fixture(scope="module")
def release_files(tmp_path_factory):
    return unpack_release(tmp_path_factory.mktemp("release"))


def unpack_release(out):
    """SGLang 0.5.10.post1's device_communicators/*.py (the real sdist) under OUT/plain and OUT/patched."""
    archive = download("sglang", "0.5.10.post1")
    prefix = "sglang-0.5.10.post1/sglang/" + COMM + "/"
    with tarfile.open(archive) as tf:
        for member in tf.getmembers():
            if member.name.startswith(prefix) and member.name.endswith(".py") and member.isfile():
                (out / "plain/sglang" / COMM).mkdir(parents=True, exist_ok=True)
                (out / "plain/sglang" / COMM / os.path.basename(member.name)).write_bytes(tf.extractfile(member).read())
    shutil.copytree(out / "plain", out / "patched")
    for patch in PATCHES:
        # the table the reader's name resolves to through its imports, as the role patches it
        candidates = [(str(out / "patched/sglang" / patch["file"]), patch["symbol"])]
        _i, _reader, _sym, target, resolved, _chain, data = psp.resolve_read_target(
            candidates, lambda p: pathlib.Path(p).read_bytes(), os.path.exists)
        entries = [{"key": e["key"], "value_from_key": e["value_from_key"]} for e in patch["entries"]]
        pathlib.Path(target).write_bytes(psp.ensure_entries(data, resolved, entries, target)["source"])
    return out


def make_host(tmp_path, release_files, *, patched=True, held=None, loaded="580.173.02"):
    """A converged host under tmp_path: Ubuntu's 580 open stack as recorded (all held), CUDA 13.0, build COMMIT served
    and patched, the unit equal to its known-good copy and a model recorded by model_manifest."""
    root = tmp_path / "host"
    installed, recorded_held = fx.recorded_ubuntu_580()
    status = fx.status_text("ubuntu-noble", installed, held=recorded_held if held is None else held) + "\n" + CUDA_STANZA
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(status)
    if loaded:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(loaded + "\n")
        (root / "proc/driver/nvidia").mkdir(parents=True)
        (root / "proc/driver/nvidia/version").write_text(OPEN_580.replace("580.173.02", loaded))
    (root / "etc/apt/preferences.d").mkdir(parents=True)
    build = root / "opt/sglang/builds" / COMMIT
    shutil.copytree(release_files / ("patched" if patched else "plain") / "sglang", build / "src/python/sglang")
    (build / "build.json").write_text(json.dumps({"commit": COMMIT, "ref": COMMIT, "version": "0.5.10.post1",
                                                  "built_at": "2026-12-01T10:00:00Z", "build_seconds": 412.5,
                                                  "verified": {"python": "/opt/sglang/venv/bin/python"}}))
    os.symlink(str(build), str(root / "opt/sglang/current"))
    unit = "[Unit]\nDescription=SGLang server (tiny)\n[Service]\nExecStart=/bin/true\n"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/sglang-tiny.service").write_text(unit)
    (root / "var/lib/gpufleet/sglang/known-good").mkdir(parents=True)
    (root / "var/lib/gpufleet/sglang/known-good/sglang-tiny.service").write_text(unit)
    (root / "var/lib/gpufleet/sglang/deployment-tiny.json").write_text(json.dumps(
        {"profile": "tiny", "sglang_commit": COMMIT, "generated": "2026-12-01T10:05:00Z"}))
    model = root / "srv/models/tiny"
    model.mkdir(parents=True)
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"\0" * 4096}
    record = {"format": mm.FORMAT, "model_path": str(model), "files": {}}
    for name, data in files.items():
        (model / name).write_bytes(data)
        info = os.stat(model / name)
        record["files"][name] = {"size": len(data), "stat": mm.fingerprint(info), "sha256": hashlib.sha256(data).hexdigest()}
    (root / "var/lib/gpufleet/models").mkdir(parents=True)
    pathlib.Path(mm.record_path(str(model), str(root / "var/lib/gpufleet/models"))).write_text(json.dumps(record))
    return root


def params(root, **over):
    out = {"dpkg_status": str(root / "var/lib/dpkg/status"), "procfs_root": str(root / "proc"),
           "sysfs_root": str(root / "sys"), "apt_preferences": [str(root / "etc/apt/preferences")],
           "apt_preferences_dirs": [str(root / "etc/apt/preferences.d")],
           "driver": {"branch": "580", "version": "", "flavor": "open", "hold": True}, "cuda_version": "13.0",
           "build_dir": str(root / "opt/sglang"), "ref": COMMIT, "git_url": "https://github.com/sgl-project/sglang.git",
           "python": "/opt/sglang/venv/bin/python", "patches": PATCHES, "required_keys": [12],
           "unit_dir": str(root / "etc/systemd/system"), "unit_name": "sglang-tiny.service", "unit_content": None,
           "known_good_dir": str(root / "var/lib/gpufleet/sglang/known-good"),
           "restart_marker": str(root / "var/lib/gpufleet/sglang/restart-pending"),
           "model_path": str(root / "srv/models/tiny"), "model_record_dir": str(root / "var/lib/gpufleet/models"),
           "hashes": False, "deployment_record": str(root / "var/lib/gpufleet/sglang/deployment-tiny.json")}
    out.update(over)
    return out


ACTIVE = "ActiveState=active\nSubState=running\nNeedDaemonReload=no\nActiveEnterTimestamp=Sat 2026-12-05 06:00:00 UTC\n"


def fake_systemctl(show=ACTIVE):
    def run(argv):
        assert argv[1] == "show", argv  # the only command besides git; never a write
        return 0, show, ""
    return run


def which(name):
    return "/bin/systemctl" if name == "systemctl" else None


def states(result):
    return {name: c["state"] for name, c in result["concerns"].items()}


def test_converged_host_is_all_ok(tmp_path, release_files):
    root = make_host(tmp_path, release_files)
    result = fs.read(params(root), fake_systemctl(), which)
    assert states(result) == dict.fromkeys(fs.CONCERNS, "ok"), result
    assert result["concerns"]["driver"]["installed"] == "580.173.02"
    assert result["concerns"]["driver"]["flavor"] == "open"
    assert result["concerns"]["sglang"]["build_seconds"] == 412.5
    assert result["concerns"]["patch"]["tables"]["all_reduce_max_sizes"]["keys"] == ["9", "10", "12"]
    assert result["deployment"]["profile"] == "tiny"


def test_each_drift_is_its_own_concern(tmp_path, release_files):
    root = make_host(tmp_path, release_files, patched=False, loaded="580.95.05")
    (root / "etc/systemd/system/sglang-tiny.service").write_text("[Unit]\nDescription=edited\n")
    (root / "var/lib/gpufleet/sglang/restart-pending").write_text(
        json.dumps({"at": "2026-12-05T00:00:00Z", "source": "sglang_service", "reason": "the unit changed"}) + "\n")
    with open(root / "srv/models/tiny/model.safetensors", "r+b") as handle:
        handle.truncate(1000)
    (root / "etc/apt/preferences.d/hand").write_text("Package: nvidia-utils-580\nPin: version 580.95.05-0ubuntu1\n"
                                                     "Pin-Priority: 1001\n")
    other = root / "opt/sglang/builds" / OTHER
    shutil.copytree(root / "opt/sglang/builds" / COMMIT, other)
    (other / "build.json").write_text(json.dumps({"commit": OTHER, "verified": {"python": "/opt/sglang/venv/bin/python"}}))
    os.unlink(root / "opt/sglang/current")
    os.symlink(str(other), str(root / "opt/sglang/current"))
    show = ACTIVE.replace("NeedDaemonReload=no", "NeedDaemonReload=yes")
    result = fs.read(params(root), fake_systemctl(show), which)
    assert states(result) == {"driver": "drift", "cuda": "ok", "sglang": "drift", "patch": "drift", "unit": "drift",
                              "restart": "pending", "model": "drift"}
    driver = result["concerns"]["driver"]
    assert driver["reboot_pending"] and not driver["reinstall"]
    assert any("pins nvidia-utils-580 to version 580.95.05-0ubuntu1" in d for d in driver["detail"])
    assert any("loaded kernel module 580.95.05, installed 580.173.02" in d for d in driver["detail"])
    sglang = result["concerns"]["sglang"]
    assert sglang["served_commit"] == OTHER and sglang["ref_commit"] == COMMIT and sglang["ref_built"]
    assert any("lacks key(s) 12" in d for d in result["concerns"]["patch"]["detail"])
    assert any("line 2" in d for d in result["concerns"]["unit"]["detail"])
    assert result["concerns"]["restart"]["reasons"] == ["the unit changed"]
    assert result["concerns"]["model"]["bytes_missing"] == 4096 - 1000


def test_driver_branch_flavour_and_lock(tmp_path, release_files):
    installed, held = fx.recorded_ubuntu_580()
    packages = hs.parse_dpkg_status_file(fx.status_text("ubuntu-noble", installed, held=held - {"nvidia-utils-580"}))
    judged = fs.judge_driver(packages, None, [], {"branch": "595", "version": "", "flavor": "proprietary", "hold": True})
    assert judged["state"] == "drift" and judged["reinstall"]
    text = " | ".join(judged["detail"])
    assert "branch 580 installed, inventory wants 595" in text
    assert "flavour open installed, inventory wants proprietary" in text
    assert "nvidia-utils-580" in text and "not locked" in text
    # nothing loaded (a container, or before the first reboot): no reboot is judged pending from it
    assert judged["loaded"] is None and judged["reboot_pending"] is False


def test_mixed_stack_is_drift(tmp_path):
    installed, held = fx.recorded_ubuntu_580()
    text = fx.status_text("ubuntu-noble", installed, held=held)
    text = text.replace("Package: nvidia-utils-580\nStatus: hold ok installed\nPriority: optional\nArchitecture: amd64\n"
                        "Version: 580.173.02-0ubuntu0.24.04.1",
                        "Package: nvidia-utils-580\nStatus: hold ok installed\nPriority: optional\nArchitecture: amd64\n"
                        "Version: 580.95.05-0ubuntu0.24.04.2")
    judged = fs.judge_driver(hs.parse_dpkg_status_file(text), None, [], {"branch": "580", "flavor": "open"})
    assert judged["state"] == "drift" and judged["versions"] == ["580.173.02", "580.95.05"]
    assert any(d.startswith("mixed stack") for d in judged["detail"])


def test_hashes_on_request_find_same_size_corruption(tmp_path, release_files):
    root = make_host(tmp_path, release_files)
    path = root / "srv/models/tiny/model.safetensors"
    info = os.stat(path)
    path.write_bytes(b"\1" * 4096)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert fs.read(params(root), fake_systemctl(), which)["concerns"]["model"]["state"] == "ok"
    hashed = fs.read(params(root, hashes=True), fake_systemctl(), which)["concerns"]["model"]
    assert hashed["state"] == "drift" and hashed["bytes_missing"] == 4096


def test_unit_against_rendered_content(tmp_path, release_files):
    root = make_host(tmp_path, release_files)
    rendered = (root / "etc/systemd/system/sglang-tiny.service").read_text()
    ok = fs.read(params(root, unit_content=rendered), fake_systemctl(), which)["concerns"]["unit"]
    assert ok["state"] == "ok" and ok["compared_with"] == "rendered from the inventory"
    drift = fs.read(params(root, unit_content=rendered + "Environment=A=1\n"), fake_systemctl(), which)["concerns"]["unit"]
    assert drift["state"] == "drift" and "line 5 missing" in drift["detail"][0]


def test_ref_resolved_in_a_real_clone_without_fetching(tmp_path, release_files):
    """A branch ref: git ls-remote against the local clone's origin (a real repository here), no fetch."""
    root = make_host(tmp_path, release_files)
    origin = tmp_path / "origin"
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "commit", "-q", "--allow-empty", "-m", "one"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(root / "opt/sglang/repo.git")], check=True)
    subprocess.run(["git", "-C", str(origin), "commit", "-q", "--allow-empty", "-m", "two"], check=True, env=env)
    head = subprocess.run(["git", "-C", str(origin), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    before = sorted(p.name for p in (root / "opt/sglang/repo.git/objects").iterdir())

    def run(argv):
        if argv[1] == "show":
            return 0, ACTIVE, ""
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    sglang = fs.read(params(root, ref="main"), run, lambda name: shutil.which(name) if name == "git" else "/bin/systemctl")[
        "concerns"]["sglang"]
    assert sglang["ref_commit"] == head and sglang["state"] == "drift" and not sglang["ref_built"]
    assert sorted(p.name for p in (root / "opt/sglang/repo.git/objects").iterdir()) == before


def test_module_reads_and_changes_nothing(tmp_path, release_files):
    """The module as Ansible runs it: changed false, the host tree byte for byte and stat for stat the same."""
    root = make_host(tmp_path, release_files)

    def snapshot():
        out = {}
        for path in sorted(root.rglob("*")):
            info = os.lstat(path)
            out[str(path)] = (info.st_mtime_ns, info.st_ino, info.st_size,
                              hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else None)
        return out

    before = snapshot()
    args = params(root)
    args["unit_content"] = None
    del args["unit_content"]
    result = run_module_file("host_status", tmp_path, **args)
    assert result["_rc"] == 0, result
    assert result["changed"] is False
    assert result["concerns"]["patch"]["state"] == "ok" and result["concerns"]["driver"]["state"] == "ok"
    assert snapshot() == before


def test_unreachable_remote_leaves_the_ref_unknown(tmp_path, release_files):
    """A branch ref with no local clone and a remote that does not answer: unknown, not drift."""
    root = make_host(tmp_path, release_files)

    def run(argv):
        if argv[1] == "show":
            return 0, ACTIVE, ""
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    missing = tmp_path / "no-such-repository"
    sglang = fs.read(params(root, ref="main", git_url=str(missing)), run,
                     lambda name: shutil.which(name) if name == "git" else "/bin/systemctl")["concerns"]["sglang"]
    assert sglang["state"] == "unknown" and sglang["ref_commit"] is None
    assert "ls-remote" in sglang["detail"][0]
