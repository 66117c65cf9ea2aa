"""sglang_service's host reads (plugins/module_utils/sglang_service_state.py, module sglang_service_state).

Real files, directories, links and accounts of this machine (root, nobody/nogroup), and a real fork that drops
to nobody for the access check (so the tests run as root, like `make test`). The only double is `systemctl` for
the apply read (no systemd as PID 1 here): a script printing what `systemctl show -p LoadState -p ActiveState
-p UnitFileState -p NeedDaemonReload` prints (KEY=VALUE lines in the order asked, systemd(1) manual) and
recording the arguments it was given, so the test checks both. These assertions were those of
tests/integration/service/test_host_scripts.py, on the shell programs this module replaced.
"""

from __future__ import annotations

import grp
import json
import multiprocessing
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest
from support.requires import require_for_module

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_service_state as state

require_for_module(os.geteuid() != 0, "root (the access check drops to another user)")
NOBODY = pwd.getpwnam("nobody")
NOGROUP = grp.getgrgid(NOBODY.pw_gid).gr_name


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def world():
    """A directory every user may traverse (pytest's own tmp_path is 0700 root)."""
    path = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="gpufleet-service-state-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def mkdir(path, mode):
    path.mkdir()
    path.chmod(mode)
    return path


# -- host ------------------------------------------------------------------------------------------------
def test_host_read_reports_account_directories_and_access(world):
    good = mkdir(world / "good", 0o700)
    wrong_mode = mkdir(world / "wrong-mode", 0o755)
    link = world / "link"
    link.symlink_to(good)
    missing = world / "missing"
    secret_dir = mkdir(world / "model-root-only", 0o700)
    open_dir = mkdir(world / "model-open", 0o755)
    secret_file = world / "config.json"
    secret_file.write_text("{}")
    secret_file.chmod(0o600)

    found = state.read_host(
        "nobody", NOGROUP,
        [{"path": str(good), "mode": "0700"}, {"path": str(wrong_mode), "mode": "0700"},
         {"path": str(link), "mode": "0700"}, {"path": str(missing), "mode": "0755"}],
        "",
        [{"kind": "x", "path": "/bin/sh"}, {"kind": "d", "path": str(secret_dir)}, {"kind": "d", "path": str(open_dir)},
         {"kind": "r", "path": str(secret_file)}, {"kind": "r", "path": str(missing)}])

    assert found["group"] == {"name": NOGROUP, "gid": NOBODY.pw_gid, "members": grp.getgrgid(NOBODY.pw_gid).gr_mem}
    assert found["passwd"] == {"name": "nobody", "uid": NOBODY.pw_uid, "gid": NOBODY.pw_gid, "gecos": NOBODY.pw_gecos,
                               "home": NOBODY.pw_dir, "shell": NOBODY.pw_shell}
    # what `id -nG nobody` prints, primary group first
    assert found["groups"] == subprocess.run(["id", "-nG", "nobody"], capture_output=True, text=True,
                                             check=True).stdout.split()
    assert NOGROUP in found["groups"]
    assert sorted(found["directories_differ"]) == sorted(str(p) for p in (wrong_mode, link, missing))
    assert found["access_checked"] is True
    assert sorted(found["access_problems"]) == sorted([
        "%s (not readable and searchable)" % secret_dir,
        "%s (not readable)" % secret_file,
    ])
    assert found["previous_record"] == {}


def test_not_executable_and_paths_the_user_cannot_reach(world):
    script = world / "python"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    closed = mkdir(world / "closed", 0o700)
    inside = mkdir(closed / "model", 0o755)
    (inside / "config.json").write_text("{}")
    problems = state.access_check(state.account("nobody", "")["passwd"], [
        {"kind": "x", "path": str(script)}, {"kind": "d", "path": str(inside)},
        {"kind": "r", "path": str(inside / "config.json")}])
    # a model under a directory nobody cannot traverse exists for root: it is judged, not skipped
    assert problems == ["%s (not executable)" % script, "%s (not readable and searchable)" % inside,
                        "%s (not readable)" % (inside / "config.json")]
    closed.chmod(0o755)
    script.chmod(0o755)
    assert state.access_check(state.account("nobody", "")["passwd"], [
        {"kind": "x", "path": str(script)}, {"kind": "d", "path": str(inside)},
        {"kind": "r", "path": str(inside / "config.json")}]) == []


def test_access_check_takes_the_users_group(world):
    """Group bits decide for the user's group: 0750 root:nogroup is open to nobody, 0705 root:nogroup is not."""
    shared = mkdir(world / "shared", 0o750)
    os.chown(shared, 0, NOBODY.pw_gid)
    others_only = mkdir(world / "others-only", 0o705)
    os.chown(others_only, 0, NOBODY.pw_gid)
    problems = state.access_check(state.account("nobody", "")["passwd"],
                                  [{"kind": "d", "path": str(shared)}, {"kind": "d", "path": str(others_only)}])
    assert problems == ["%s (not readable and searchable)" % others_only]


def _in_forked_child(target, path):
    """Run target(str(path), queue) in a forked child (it changes its own ids): its exit code and what it put."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=target, args=(str(path), queue))
    process.start()
    answer = queue.get(timeout=30)
    process.join(30)
    return process.exitcode, answer


def _check_with_root_groups(path, queue):
    os.setgroups([0])  # the caller's supplementary group root must not reach the child
    queue.put(state.access_check(state.account("nobody", "")["passwd"], [{"kind": "d", "path": path}]))


def test_access_check_drops_the_callers_supplementary_groups(world):
    group_root_only = mkdir(world / "group-root", 0o070)
    exitcode, problems = _in_forked_child(_check_with_root_groups, group_root_only)
    assert exitcode == 0
    assert problems == ["%s (not readable and searchable)" % group_root_only]


def _check_as_nobody(path, queue):
    os.setgid(NOBODY.pw_gid)
    os.setuid(NOBODY.pw_uid)
    try:
        state.access_check(state.account("nobody", "")["passwd"], [{"kind": "d", "path": path}])
        queue.put("no refusal")
    except state.ReadError as exc:
        queue.put(str(exc))


def test_access_check_without_root_is_refused_with_the_fix(world):
    _exitcode, message = _in_forked_child(_check_as_nobody, world)
    assert message.startswith("sglang_service_user=nobody: checking what that user can use needs root")
    assert "Fix: run the role as root (become: true)" in message


def test_host_read_without_user_or_access_judges_nothing(world):
    found = state.read_host("gpufleet-no-such-user", "gpufleet-no-such-group", [], "",
                            [{"kind": "d", "path": str(world)}])
    assert found == {"passwd": None, "group": None, "groups": [], "directories_differ": [], "previous_record": {},
                     "access_checked": False, "access_problems": []}
    # root (no access list): the directories are still read, no access check
    found = state.read_host("root", "root", [{"path": str(world), "mode": "0700"}], "", None)
    assert found["directories_differ"] == [str(world)]
    assert found["access_checked"] is False and found["access_problems"] == []
    assert found["passwd"]["uid"] == 0 and found["group"]["gid"] == 0 and found["groups"][0] == "root"
    # an access list with nothing present: checked, nothing to refuse
    found = state.read_host("nobody", "", [], "", [{"kind": "d", "path": str(world / "absent")}])
    assert found["access_checked"] is True and found["access_problems"] == [] and found["group"] is None


def test_host_read_returns_the_previous_record(world):
    record = world / "deployment-a.json"
    found = state.read_host("root", "root", [], str(record), None)
    assert found["previous_record"] == {}  # none yet
    record.write_text('{"generated": "2026-12-01T00:00:00Z", "profile": "a"}\n')
    found = state.read_host("root", "root", [{"path": str(world), "mode": "0700"}], str(record), None)
    assert found["previous_record"] == {"generated": "2026-12-01T00:00:00Z", "profile": "a"}
    assert found["directories_differ"] == [str(world)]  # the directory items around it are still judged
    record.write_text("{not json")
    assert state.read_host("root", "root", [], str(record), None)["previous_record"] == {}


def test_directory_owner_and_mode(world):
    ok = mkdir(world / "ok", 0o755)
    assert not state.directory_differs(str(ok), "0755")
    assert state.directory_differs(str(ok), "0700")
    os.chown(ok, NOBODY.pw_uid, 0)
    assert state.directory_differs(str(ok), "0755")
    os.chown(ok, 0, NOBODY.pw_gid)
    assert state.directory_differs(str(ok), "0755")
    sticky = mkdir(world / "sticky", 0o1755)
    assert state.directory_differs(str(sticky), "0755")
    plain = world / "file"
    plain.write_text("")
    plain.chmod(0o755)
    assert state.directory_differs(str(plain), "0755")


# -- known good --------------------------------------------------------------------------------------------
def _snapshot_layout(base):
    unit = base / "etc" / "sglang-a.service"
    env = base / "etc" / "a.env"
    st = base / "state"
    cred = base / "etc" / "credentials"
    kg = st / "known-good"
    for path in (unit.parent, st, cred):
        path.mkdir(parents=True, exist_ok=True)
    unit.write_text("[Service]\n")
    env.write_text("A=1\n")
    (st / "deployment-a.json").write_text("{}\n")
    (st / "deployment-a.md").write_text("# a\n")
    (cred / "api-key").write_text("s3cret-value")
    build = base / "builds" / "abc123"
    build.mkdir(parents=True)
    (base / "current").symlink_to(build)
    args = [str(kg), str(cred), str(base / "current"), str(unit), "sglang-a.service", str(env), "a.env",
            [str(st / "deployment-a.json"), str(st / "deployment-a.md")]]
    return args, kg, cred, build


def _make_snapshot(kg, sources):
    kg.mkdir(mode=0o700, exist_ok=True)
    (kg / "credentials").mkdir(mode=0o700, exist_ok=True)
    for src, name in sources:
        shutil.copyfile(src, kg / name)
        (kg / name).chmod(0o600)


def test_known_good_read_finds_every_difference_then_none(tmp_path):
    args, kg, cred, build = _snapshot_layout(tmp_path)
    unit, env, (rec_json, rec_md) = args[3], args[5], args[7]

    found = state.read_known_good(*args)
    assert {str(kg), "%s/credentials" % kg, "%s/sglang-a.service" % kg, "%s/a.env" % kg,
            "%s/credentials/api-key" % kg} <= set(found["differs"])
    assert found["records"] == [rec_json, rec_md]
    assert found["credentials"] == ["api-key"]
    assert found["build"] == str(build)
    assert found["missing"] == [] and found["stale"] == [] and found["known_good"] is None
    assert "s3cret-value" not in json.dumps(found)

    _make_snapshot(kg, [(unit, "sglang-a.service"), (env, "a.env"), (rec_json, "deployment-a.json"),
                        (rec_md, "deployment-a.md"), (cred / "api-key", "credentials/api-key")])
    (kg / "known-good.json").write_text('{"profile": "a"}\n')
    (kg / "known-good.json").chmod(0o600)
    found = state.read_known_good(*args)
    assert found["differs"] == [] and found["missing"] == [] and found["stale"] == [], found
    assert found["known_good"] == {"content": '{"profile": "a"}\n', "mode": "0600", "owner": "root", "group": "root"}

    # One byte, one mode, a stale credential and another profile's files: each is reported.
    pathlib.Path(env).write_text("A=2\n")
    (kg / "deployment-a.md").chmod(0o644)
    (kg / "credentials" / "hf-old").write_text("x")
    (kg / "sglang-b.service").write_text("[Service]\n")
    (kg / "b.env").write_text("B=1\n")
    (kg / "notes.txt").write_text("kept: no snapshot pattern\n")
    found = state.read_known_good(*args)
    assert sorted(found["differs"]) == sorted(["%s/a.env" % kg, "%s/deployment-a.md" % kg])
    assert sorted(found["stale"]) == sorted(["%s/credentials/hf-old" % kg, "%s/sglang-b.service" % kg,
                                             "%s/b.env" % kg])
    (kg / "known-good.json").chmod(0o644)
    assert state.read_known_good(*args)["known_good"]["mode"] == "0644"


def test_known_good_read_judges_links_and_owners(tmp_path):
    args, kg, cred, _build = _snapshot_layout(tmp_path)
    _make_snapshot(kg, [(args[3], "sglang-a.service"), (args[5], "a.env"), (args[7][0], "deployment-a.json"),
                        (args[7][1], "deployment-a.md"), (cred / "api-key", "credentials/api-key")])
    assert state.read_known_good(*args)["differs"] == []
    os.chown(kg / "a.env", NOBODY.pw_uid, 0)
    (kg / "sglang-a.service").unlink()
    (kg / "sglang-a.service").symlink_to(args[3])  # same bytes through a link: not what copy leaves
    assert sorted(state.read_known_good(*args)["differs"]) == sorted(["%s/a.env" % kg, "%s/sglang-a.service" % kg])


def test_known_good_read_names_missing_sources(tmp_path):
    args, _kg, _cred, _build = _snapshot_layout(tmp_path)
    os.unlink(args[3])
    os.unlink(args[7][1])
    args[2] = ""  # no build link
    found = state.read_known_good(*args)
    assert found["missing"] == [args[3]]
    assert found["build"] == ""
    assert found["records"] == [args[7][0]]


# -- apply -----------------------------------------------------------------------------------------------
def fake_systemctl(directory, output):
    calls = directory / "systemctl-args"
    systemctl = directory / "systemctl"
    systemctl.write_text("#!/bin/sh\necho \"$*\" > %s\nprintf '%s'\n" % (calls, output))
    systemctl.chmod(systemctl.stat().st_mode | stat.S_IXUSR)
    return str(systemctl), calls


def test_apply_read_reads_unit_marker_and_state(tmp_path):
    systemctl, calls = fake_systemctl(
        tmp_path, "LoadState=loaded\\nActiveState=active\\nUnitFileState=enabled\\nNeedDaemonReload=no\\n")
    unit = tmp_path / "sglang-a.service"
    unit.write_text("[Service]\n")
    marker = tmp_path / "restart-pending"
    marker.write_text('{"source": "sglang_service", "reason": "the unit changed"}\n\n')

    found = state.read_apply(str(unit), str(marker), "sglang-a.service", run, systemctl)
    assert found == {"unit_present": True, "restart_reasons": [{"source": "sglang_service", "reason": "the unit changed"}],
                     "other_units": [], "status": {"LoadState": "loaded", "ActiveState": "active",
                                                   "UnitFileState": "enabled", "NeedDaemonReload": "no"}}
    assert calls.read_text().split() == ["show", "-p", "LoadState", "-p", "ActiveState", "-p", "UnitFileState",
                                         "-p", "NeedDaemonReload", "--", "sglang-a.service"]

    unit.unlink()
    marker.unlink()
    found = state.read_apply(str(unit), "", "sglang-a.service", run, systemctl)
    assert found["unit_present"] is False and found["restart_reasons"] == []
    assert found["status"]["LoadState"] == "loaded"
    assert state.read_apply(str(unit), str(marker), "sglang-a.service", run, None)["status"] == {}


def test_apply_read_lists_the_units_of_other_profiles_only(tmp_path):
    systemctl, _calls = fake_systemctl(tmp_path, "LoadState=loaded\\n")
    units = tmp_path / "system"
    units.mkdir()
    managed = "# gpufleet.llm_server.sglang_service: SGLang for model profile 'x'.\n[Service]\n"
    (units / "sglang-a.service").write_text(managed)
    (units / "sglang-b.service").write_text(managed)
    (units / "sglang-hand.service").write_text("[Service]\nExecStart=/bin/true\n")  # not ours: left alone
    (units / "sglang-c.service").symlink_to(units / "sglang-b.service")  # a link, not a unit file of ours
    (units / "other-b.service").write_text(managed)
    (units / "sglang-d.service").mkdir()
    found = state.read_apply(str(units / "sglang-a.service"), "", "sglang-a.service", run, systemctl)
    assert found["unit_present"] is True
    assert found["other_units"] == ["sglang-b.service"]
    assert found["status"] == {"LoadState": "loaded"}
