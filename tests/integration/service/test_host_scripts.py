"""The read-only shell scripts of sglang_service (roles/sglang_service/vars/main.yml) on real files.

Each script replaces several Ansible reads of a no-op run (issue 20): the account, directory and access
check of tasks/steps.yml and tasks/access.yml, the known-good comparison of tasks/mark_known_good.yml and
the unit/marker read of tasks/apply.yml. They run here with /bin/sh, coreutils and diffutils on real
files, directories, links and accounts of this machine (root, nobody/nogroup; runuser from util-linux).
The only double is `systemctl` for the apply script (no systemd as PID 1 here): a script printing what
`systemctl show -p LoadState -p ActiveState -p UnitFileState -p NeedDaemonReload` prints (KEY=VALUE lines
in the order asked, systemd(1) manual), and the arguments it was given, so the test checks both.
"""

import base64
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest
import yaml
from support.requires import require_for_module

ROOT = pathlib.Path(__file__).resolve().parents[3]
VARS = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "main.yml").read_text())

require_for_module(os.geteuid() != 0 or shutil.which("runuser") is None, "root and runuser (the scripts run as root on the host)")


def run(script, *args, env=None):
    proc = subprocess.run(["/bin/sh", "-c", script, "test-script", *args], capture_output=True, text=True,
                          check=True, env=env)
    return proc.stdout.splitlines()


@pytest.fixture
def world():
    """A directory every user may traverse (pytest's own tmp_path is 0700 root)."""
    path = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="gpufleet-host-scripts-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_host_script_reports_account_directories_and_access(world):
    good = world / "good"
    good.mkdir(mode=0o700)
    wrong_mode = world / "wrong-mode"
    wrong_mode.mkdir(mode=0o755)
    wrong_mode.chmod(0o755)
    link = world / "link"
    link.symlink_to(good)
    missing = world / "missing"
    secret_dir = world / "model-root-only"
    secret_dir.mkdir()
    secret_dir.chmod(0o700)
    open_dir = world / "model-open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    secret_file = world / "config.json"
    secret_file.write_text("{}")
    secret_file.chmod(0o600)

    lines = run(VARS["__sglang_service_host_script"], "nobody", "nogroup", VARS["__sglang_service_access_script"],
                "700:%s" % good, "700:%s" % wrong_mode, "700:%s" % link, "755:%s" % missing, "--",
                "x:/bin/sh", "d:%s" % secret_dir, "d:%s" % open_dir, "r:%s" % secret_file, "r:%s" % missing)

    group = [line for line in lines if line.startswith("group ")]
    assert len(group) == 1 and group[0].split(" ", 1)[1].split(":")[0] == "nogroup"
    passwd = [line for line in lines if line.startswith("passwd ")]
    assert len(passwd) == 1 and passwd[0].split(" ", 1)[1].split(":")[0] == "nobody"
    assert any(line.startswith("groups ") and "nogroup" in line.split() for line in lines)
    assert sorted(line for line in lines if line.startswith("directory_differs ")) == sorted(
        "directory_differs %s" % path for path in (wrong_mode, link, missing))
    assert "access checked" in lines
    assert sorted(line for line in lines if line.startswith("access ") and line != "access checked") == sorted([
        "access %s (not readable and searchable)" % secret_dir,
        "access %s (not readable)" % secret_file,
    ])


def test_host_script_without_user_or_access_script_judges_nothing(world):
    lines = run(VARS["__sglang_service_host_script"], "gpufleet-no-such-user", "gpufleet-no-such-group",
                VARS["__sglang_service_access_script"], "--", "d:%s" % world)
    assert lines == []
    # root (access script empty): the directories are still read, no access check.
    lines = run(VARS["__sglang_service_host_script"], "root", "root", "", "700:%s" % world, "--", "d:%s" % world)
    assert "directory_differs %s" % world in lines
    assert not any(line.startswith("access") for line in lines)


def _snapshot_layout(base):
    unit = base / "etc" / "sglang-a.service"
    env = base / "etc" / "a.env"
    state = base / "state"
    cred = base / "etc" / "credentials"
    kg = state / "known-good"
    for path in (unit.parent, state, cred):
        path.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Service]\n")
    env.write_text("A=1\n")
    (state / "deployment-a.json").write_text("{}\n")
    (state / "deployment-a.md").write_text("# a\n")
    (cred / "api-key").write_text("s3cret-value")
    build = base / "builds" / "abc123"
    build.mkdir(parents=True)
    (base / "current").symlink_to(build)
    args = [str(kg), str(cred), str(base / "current"), str(unit), "sglang-a.service", str(env), "a.env",
            str(state / "deployment-a.json"), str(state / "deployment-a.md")]
    return args, kg, cred, build


def _make_snapshot(kg, sources):
    kg.mkdir(mode=0o700, exist_ok=True)
    (kg / "credentials").mkdir(mode=0o700, exist_ok=True)
    for src, name in sources:
        shutil.copyfile(src, kg / name)
        (kg / name).chmod(0o600)


def test_known_good_script_finds_every_difference_then_none(tmp_path):
    args, kg, cred, build = _snapshot_layout(tmp_path)
    script = VARS["__sglang_service_known_good_script"]

    lines = run(script, *args)
    assert "differs %s" % kg in lines and "differs %s/credentials" % kg in lines
    assert "differs %s/sglang-a.service" % kg in lines and "differs %s/a.env" % kg in lines
    assert "differs %s/credentials/api-key" % kg in lines
    assert [line for line in lines if line.startswith("record ")] == [
        "record %s" % args[7], "record %s" % args[8]]
    assert "credential api-key" in lines
    assert "build %s" % build in lines
    assert not any(line.startswith(("known_good", "missing", "stale")) for line in lines)
    assert not any("s3cret-value" in line for line in lines)

    _make_snapshot(kg, [(args[3], "sglang-a.service"), (args[5], "a.env"), (args[7], "deployment-a.json"),
                        (args[8], "deployment-a.md"), (cred / "api-key", "credentials/api-key")])
    (kg / "known-good.json").write_text('{"profile": "a"}\n')
    (kg / "known-good.json").chmod(0o600)
    lines = run(script, *args)
    assert not any(line.startswith(("differs", "missing", "stale")) for line in lines), lines
    content = [line.split(" ", 1)[1] for line in lines if line.startswith("known_good ")]
    assert [base64.b64decode(value).decode() for value in content] == ['{"profile": "a"}\n']
    assert "known_good_attrs 600 root root" in lines

    # One byte, one mode, a stale credential and another profile's files: each is reported.
    pathlib.Path(args[5]).write_text("A=2\n")
    (kg / "deployment-a.md").chmod(0o644)
    (kg / "credentials" / "hf-old").write_text("x")
    (kg / "sglang-b.service").write_text("[Service]\n")
    (kg / "b.env").write_text("B=1\n")
    lines = run(script, *args)
    assert sorted(line for line in lines if line.startswith(("differs", "stale"))) == sorted([
        "differs %s/a.env" % kg, "differs %s/deployment-a.md" % kg,
        "stale %s/credentials/hf-old" % kg, "stale %s/sglang-b.service" % kg, "stale %s/b.env" % kg])


def test_known_good_script_names_missing_sources(tmp_path):
    args, _kg, _cred, _build = _snapshot_layout(tmp_path)
    os.unlink(args[3])
    args[2] = ""  # no build link
    lines = run(VARS["__sglang_service_known_good_script"], *args)
    assert "missing %s" % args[3] in lines
    assert not any(line.startswith("build") for line in lines)


def test_apply_script_reads_unit_marker_and_state(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    calls = tmp_path / "systemctl-args"
    systemctl = fake_bin / "systemctl"
    systemctl.write_text("#!/bin/sh\necho \"$*\" > %s\n"
                         "printf 'LoadState=loaded\\nActiveState=active\\nUnitFileState=enabled\\nNeedDaemonReload=no\\n'\n"
                         % calls)
    systemctl.chmod(systemctl.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ["PATH"]))
    unit = tmp_path / "sglang-a.service"
    unit.write_text("[Service]\n")
    marker = tmp_path / "restart-pending"
    marker.write_text('{"source": "sglang_service", "reason": "the unit changed"}\n')

    lines = run(VARS["__sglang_service_apply_script"], str(unit), str(marker), "sglang-a.service", env=env)
    assert lines == ["unit present", 'marker {"source": "sglang_service", "reason": "the unit changed"}',
                     "show LoadState=loaded", "show ActiveState=active", "show UnitFileState=enabled",
                     "show NeedDaemonReload=no"]
    assert calls.read_text().split() == ["show", "-p", "LoadState", "-p", "ActiveState", "-p", "UnitFileState",
                                         "-p", "NeedDaemonReload", "--", "sglang-a.service"]

    unit.unlink()
    marker.unlink()
    lines = run(VARS["__sglang_service_apply_script"], str(unit), "", "sglang-a.service", env=env)
    assert lines[0] == "show LoadState=loaded" and not any(line.startswith(("unit", "marker")) for line in lines)


def test_host_script_prints_the_previous_record(world):
    record = world / "deployment-a.json"
    lines = run(VARS["__sglang_service_host_script"], "root", "root", "", "record:%s" % record, "--")
    assert not any(line.startswith("record") for line in lines)  # none yet: nothing printed
    record.write_text('{"generated": "2026-12-01T00:00:00Z", "profile": "a"}\n')
    lines = run(VARS["__sglang_service_host_script"], "root", "root", "", "700:%s" % world, "record:%s" % record, "--")
    records = [line for line in lines if line.startswith("record ")]
    assert len(records) == 1 and base64.b64decode(records[0][7:]) == record.read_bytes()
    assert "directory_differs %s" % world in lines  # the directory items around it are still judged


def test_apply_script_lists_the_units_of_other_profiles_only(tmp_path):
    """What ansible.builtin.find (patterns sglang-*.service, contains the role's name, not ours) found."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    systemctl = fake_bin / "systemctl"
    systemctl.write_text("#!/bin/sh\nprintf 'LoadState=loaded\\n'\n")
    systemctl.chmod(systemctl.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ["PATH"]))
    units = tmp_path / "system"
    units.mkdir()
    managed = "# gpufleet.llm_server.sglang_service: SGLang for model profile 'x'.\n[Service]\n"
    (units / "sglang-a.service").write_text(managed)
    (units / "sglang-b.service").write_text(managed)
    (units / "sglang-hand.service").write_text("[Service]\nExecStart=/bin/true\n")  # not ours: left alone
    (units / "sglang-c.service").symlink_to(units / "sglang-b.service")  # a link, not a unit file of ours
    (units / "other-b.service").write_text(managed)
    lines = run(VARS["__sglang_service_apply_script"], str(units / "sglang-a.service"), "", "sglang-a.service", env=env)
    assert lines == ["unit present", "other sglang-b.service", "show LoadState=loaded"]
