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


SYSTEMD_252 = "systemd 252 (252.39-1~deb12u2)\n+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT -GNUTLS +OPENSSL\n"


def fake_systemctl(show=ACTIVE):
    def run(argv):
        assert argv[1] in ("show", "--version"), argv  # the only commands besides git; never a write
        return 0, (SYSTEMD_252 if argv[1] == "--version" else show), ""
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


# -- the unit against the rendering from today's inventory (compared on the controller: fleet_plan.report) ---------
# Lines of a unit as sglang_service's template renders them (the ExecStart argv of a profile).
UNIT = ("# Ansible managed\n[Unit]\nDescription=SGLang server (tiny)\n[Service]\nEnvironmentFile=/etc/gpufleet/sglang/tiny.env\n"
        "ExecStart=\"/opt/sglang/venv/bin/python\" \"/usr/local/libexec/gpufleet/gpufleet-launch\" -m sglang.launch_server -- "
        "--model-path /srv/models/tiny --tp-size 8 --mem-fraction-static 0.88\nRestart=on-failure\n")
ENV = 'CUDA_HOME="/usr/local/cuda-13.0"\nGPUFLEET_SGLANG_PROFILE="tiny"\n'


def unit_host(tmp_path, release_files):
    root = make_host(tmp_path, release_files)
    (root / "etc/systemd/system/sglang-tiny.service").write_text(UNIT)
    (root / "var/lib/gpufleet/sglang/known-good/sglang-tiny.service").write_text(UNIT)
    (root / "etc/gpufleet/sglang").mkdir(parents=True)
    (root / "etc/gpufleet/sglang/tiny.env").write_text(ENV)
    return root


def read_unit(root, **over):
    args = params(root, env_file=str(root / "etc/gpufleet/sglang/tiny.env"), **over)
    return fs.read(args, fake_systemctl(), which)["concerns"]["unit"]


def test_unit_rendered_the_same_is_ok_and_drops_the_texts(tmp_path, release_files):
    root = unit_host(tmp_path, release_files)
    unit = read_unit(root)
    assert unit["installed_text"] == UNIT and unit["env_text"] == ENV  # kept for the controller's comparison
    judged = fs.rejudge_unit(unit, {"unit": UNIT, "env": ENV})
    assert judged["state"] == "ok" and judged["detail"] == [], judged
    assert judged["compared_with"] == "rendered from the inventory" and judged["env_compared"] is True
    assert not set(fs.UNIT_WORK_FACTS) & set(judged)


def test_unit_changed_profile_flag_shows_the_first_differing_line(tmp_path, release_files):
    """The inventory's profile changed (another --mem-fraction-static): the installed unit equals its known-good
    snapshot, so only the comparison with the rendering sees it."""
    root = unit_host(tmp_path, release_files)
    unit = read_unit(root)
    assert unit["state"] == "ok"  # the known-good comparison alone: invisible
    judged = fs.rejudge_unit(unit, {"unit": UNIT.replace("0.88", "0.80"), "env": ENV})
    assert judged["state"] == "drift"
    assert len(judged["detail"]) == 1, judged["detail"]
    assert "differs from the unit rendered from the inventory (line 6:" in judged["detail"][0]
    assert "--mem-fraction-static 0.88" in judged["detail"][0] and "--mem-fraction-static 0.80" in judged["detail"][0]
    added = fs.rejudge_unit(unit, {"unit": UNIT + "Environment=A=1\n", "env": ENV})
    assert added["state"] == "drift" and "line 8 missing: 'Environment=A=1'" in added["detail"][0]


def test_unit_environment_file_compared_too(tmp_path, release_files):
    root = unit_host(tmp_path, release_files)
    judged = fs.rejudge_unit(read_unit(root), {"unit": UNIT, "env": ENV.replace("13.0", "13.1")})
    assert judged["state"] == "drift"
    assert judged["detail"] == ["%s differs from the environment file rendered from the inventory (line 1: %r, wanted %r)" % (
        root / "etc/gpufleet/sglang/tiny.env", 'CUDA_HOME="/usr/local/cuda-13.0"', 'CUDA_HOME="/usr/local/cuda-13.1"')]
    (root / "etc/gpufleet/sglang/tiny.env").unlink()
    missing = fs.rejudge_unit(read_unit(root), {"unit": UNIT, "env": ENV})
    assert missing["state"] == "drift" and missing["detail"] == ["%s is not installed" % (root / "etc/gpufleet/sglang/tiny.env")]


def test_unit_not_rendered_falls_back_to_the_known_good_snapshot(tmp_path, release_files):
    root = unit_host(tmp_path, release_files)
    why = "no SGLang build is served to render the unit against"
    ok = fs.rejudge_unit(read_unit(root), {"unit": None, "env": None, "reason": why})
    assert ok["state"] == "ok" and ok["render_error"] == why
    assert ok["detail"] == ["not rendered from the inventory (%s): compared with the known-good snapshot %s" % (
        why, root / "var/lib/gpufleet/sglang/known-good/sglang-tiny.service")]
    (root / "etc/systemd/system/sglang-tiny.service").write_text(UNIT.replace("0.88", "0.5"))
    drift = fs.rejudge_unit(read_unit(root), {"unit": None, "reason": why})
    assert drift["state"] == "drift" and "known-good snapshot" in drift["detail"][0] and "line 6" in drift["detail"][0]
    assert why in drift["detail"][1]


def test_unit_inactive_and_reload_pending_kept_after_the_comparison(tmp_path, release_files):
    root = unit_host(tmp_path, release_files)
    args = params(root, env_file=str(root / "etc/gpufleet/sglang/tiny.env"))
    unit = fs.read(args, fake_systemctl(ACTIVE.replace("NeedDaemonReload=no", "NeedDaemonReload=yes")), which)["concerns"]["unit"]
    judged = fs.rejudge_unit(unit, {"unit": UNIT, "env": ENV})
    assert judged["state"] == "pending" and "NeedDaemonReload=yes" in judged["detail"][0]
    stopped = fs.read(args, fake_systemctl(ACTIVE.replace("ActiveState=active", "ActiveState=failed")), which)["concerns"]["unit"]
    assert fs.rejudge_unit(stopped, {"unit": UNIT, "env": ENV})["state"] == "drift"


def test_records_of_start_to_ready_and_reboot(tmp_path, release_files):
    root = make_host(tmp_path, release_files)
    state = root / "var/lib/gpufleet"
    (state / "sglang/start-to-ready.json").write_text(json.dumps({"start_to_ready_s": 412.3, "recorded": "2026-12-05T06:00:00Z"}))
    (state / "nvidia-driver").mkdir()
    (state / "nvidia-driver/reboot.json").write_text(json.dumps({"reboot_s": 95.5, "recorded": "2026-12-04T06:00:00Z"}))
    args = params(root, start_record=str(state / "sglang/start-to-ready.json"), reboot_record=str(state / "nvidia-driver/reboot.json"))
    records = fs.read(args, fake_systemctl(), which)["records"]
    assert records["start_to_ready"]["seconds"] == 412.3 and records["start_to_ready"]["recorded"] == "2026-12-05T06:00:00Z"
    assert records["reboot"]["seconds"] == 95.5 and records["reboot"]["error"] is None
    (state / "nvidia-driver/reboot.json").write_text("{not json")
    (state / "sglang/start-to-ready.json").write_text(json.dumps({"start_to_ready_s": "soon"}))
    records = fs.read(args, fake_systemctl(), which)["records"]
    assert records["reboot"]["seconds"] is None and records["reboot"]["error"].startswith("not JSON")
    assert records["start_to_ready"]["seconds"] is None and "not a number" in records["start_to_ready"]["error"]
    none = fs.read(params(root), fake_systemctl(), which)["records"]
    assert none["start_to_ready"] == {"path": None, "seconds": None, "recorded": None, "error": None}


@pytest.mark.parametrize("encrypt, creds, version, want", [
    ("auto", "/usr/bin/systemd-creds", SYSTEMD_252, ("encrypted", "LoadCredentialEncrypted")),
    ("auto", None, SYSTEMD_252, ("plain", "LoadCredential")),
    ("never", "/usr/bin/systemd-creds", SYSTEMD_252, ("plain", "LoadCredential")),
    ("auto", "/usr/bin/systemd-creds", "systemd 245 (245.4)\n", (None, None)),
])
def test_credential_format_as_systemd_credential_would_choose(encrypt, creds, version, want):
    def run(argv):
        assert argv == ["/bin/systemctl", "--version"], argv
        return 0, version, ""
    got = fs.credential_format(encrypt, run, {"systemctl": "/bin/systemctl", "systemd-creds": creds}.get)
    assert (got["format"], got["directive"]) == want
    assert (got["error"] is None) == (want[0] is not None)
