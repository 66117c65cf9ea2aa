"""server_file and systemd_credential, run as real module processes on this machine (tmp paths, no root
needed for the plain format). The encrypted format needs root and the host key: it runs in
molecule/sglang_service (systemd 252's systemd-creds in the container), not here."""

import stat

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import read
from ansible_collections.gpufleet.llm_server.plugins.module_utils.systemd_credential import (
    choose_format, systemd_version)

from support.ansible_harness import run_module_file


def test_server_file_marks_before_a_content_change_and_only_then(tmp_path):
    dest, marker = tmp_path / "unit.service", tmp_path / "state" / "restart-pending"
    common = dict(dest=str(dest), mode="0644", restart_marker=str(marker), restart_source="test")
    first = run_module_file("server_file", tmp_path, content="a\n", **common)
    assert first["changed"] and first["restart_marked"] and dest.read_text() == "a\n"
    assert [e["source"] for e in read(str(marker))] == ["test"]
    again = run_module_file("server_file", tmp_path, content="a\n", **common)
    assert not again["changed"] and not again["restart_marked"] and len(read(str(marker))) == 1
    mode_only = run_module_file("server_file", tmp_path, **{**common, "content": "a\n", "mode": "0600"})
    assert mode_only["changed"] and not mode_only["restart_marked"] and stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert len(read(str(marker))) == 1


def test_server_file_check_and_diff_mode_write_nothing(tmp_path):
    dest, marker = tmp_path / "env", tmp_path / "m"
    dest.write_text("old\n")
    out = run_module_file("server_file", tmp_path, dest=str(dest), content="new\n", restart_marker=str(marker),
                          _ansible_check_mode=True, _ansible_diff=True)
    assert out["changed"] and not out["restart_marked"]
    assert out["diff"]["before"] == "old\n" and out["diff"]["after"] == "new\n"
    assert dest.read_text() == "old\n" and not marker.exists()


def test_server_file_refuses_a_missing_directory_without_marking(tmp_path):
    marker = tmp_path / "m"
    out = run_module_file("server_file", tmp_path, dest=str(tmp_path / "no" / "unit"), content="x",
                          restart_marker=str(marker))
    assert out["failed"] and "does not exist" in out["msg"] and not marker.exists()


@pytest.mark.parametrize("encrypt, version, creds, expect", [
    ("auto", 252, True, ("encrypted", None)),
    ("auto", 249, True, ("plain", None)),
    ("auto", 252, False, ("plain", None)),
    ("never", 255, True, ("plain", None)),
    ("always", 249, True, (None, "encrypt=always")),
    ("auto", 245, True, (None, "no LoadCredential=")),
    ("auto", None, True, (None, "cannot tell")),
])
def test_choose_format(encrypt, version, creds, expect):
    fmt, error = choose_format(encrypt, version, creds)
    assert fmt == expect[0]
    assert (error is None) if expect[1] is None else (expect[1] in error)


def test_systemd_version_parses_systemctl_output():
    assert systemd_version("systemd 252 (252.39-1~deb12u2)\n+PAM +AUDIT") == 252
    assert systemd_version("garbage") is None


def test_plain_credential_is_private_idempotent_and_marks_changes(tmp_path):
    """Needs `systemctl --version` (Debian's systemd package, installed on the development/CI VM)."""
    directory, marker = tmp_path / "credentials", tmp_path / "m"
    common = dict(name="api-key", directory=str(directory), encrypt="never", restart_marker=str(marker))
    first = run_module_file("systemd_credential", tmp_path, value="sk-one", **common)
    assert first["changed"] and first["restart_marked"], first
    assert first["directive"] == "LoadCredential" and first["path"] == str(directory / "api-key")
    assert (directory / "api-key").read_text() == "sk-one"
    assert stat.S_IMODE((directory / "api-key").stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert "sk-one" not in str({k: v for k, v in first.items() if k != "_stderr"})  # value is no_log
    again = run_module_file("systemd_credential", tmp_path, value="sk-one", **common)
    assert not again["changed"] and len(read(str(marker))) == 1
    changed = run_module_file("systemd_credential", tmp_path, value="sk-two", **common)
    assert changed["changed"] and (directory / "api-key").read_text() == "sk-two" and len(read(str(marker))) == 2
    check = run_module_file("systemd_credential", tmp_path, value="sk-three", _ansible_check_mode=True, **common)
    assert check["changed"] and (directory / "api-key").read_text() == "sk-two" and len(read(str(marker))) == 2
    gone = run_module_file("systemd_credential", tmp_path, state="absent", **common)
    assert gone["changed"] and not (directory / "api-key").exists() and len(read(str(marker))) == 3
    bad = run_module_file("systemd_credential", tmp_path, **{**common, "value": "x", "name": "../etc"})
    assert bad["failed"] and "must be letters" in bad["msg"]


def test_server_files_write_each_file_and_mark_only_for_restart_files(tmp_path):
    """files: one module run for several files; per-file results, one marker line per restart-relevant change."""
    env, unit, record, marker = tmp_path / "a.env", tmp_path / "a.service", tmp_path / "rec.json", tmp_path / "m"
    files = [dict(dest=str(env), content="A=1\n", mode="0600", restart_reason="the environment file changed"),
             dict(dest=str(unit), content="[Unit]\n", restart_reason="the unit changed"),
             dict(dest=str(record), content="{}\n", restart=False)]
    first = run_module_file("server_file", tmp_path, files=files, mode="0644", restart_marker=str(marker),
                            restart_source="test")
    assert first["changed"] and first["restart_marked"], first
    assert [f["changed"] for f in first["files"]] == [True, True, True]
    assert first["resources"] == [str(env), str(unit), str(record)]
    assert [e["reason"] for e in read(str(marker))] == ["the environment file changed", "the unit changed"]
    assert stat.S_IMODE(env.stat().st_mode) == 0o600 and stat.S_IMODE(unit.stat().st_mode) == 0o644
    again = run_module_file("server_file", tmp_path, files=files, mode="0644", restart_marker=str(marker))
    assert not again["changed"] and not again["restart_marked"] and len(read(str(marker))) == 2
    files[2]["content"] = "{\"a\": 1}\n"
    record_only = run_module_file("server_file", tmp_path, files=files, mode="0644", restart_marker=str(marker))
    assert record_only["changed"] and not record_only["restart_marked"]
    assert [f["changed"] for f in record_only["files"]] == [False, False, True]
    assert len(read(str(marker))) == 2 and record.read_text() == "{\"a\": 1}\n"


def test_server_files_check_and_diff_mode_show_each_diff_and_write_nothing(tmp_path):
    one, two, marker = tmp_path / "one", tmp_path / "two", tmp_path / "m"
    one.write_text("old\n")
    two.write_text("same\n")
    out = run_module_file("server_file", tmp_path, files=[dict(dest=str(one), content="new\n"),
                                                          dict(dest=str(two), content="same\n")],
                          restart_marker=str(marker), _ansible_check_mode=True, _ansible_diff=True)
    assert out["changed"] and not out["restart_marked"]
    assert out["diff"] == [{"before_header": str(one), "after_header": str(one), "before": "old\n", "after": "new\n"}]
    assert one.read_text() == "old\n" and not marker.exists()


def test_server_files_refuse_a_missing_directory_before_any_write(tmp_path):
    first, marker = tmp_path / "first", tmp_path / "m"
    out = run_module_file("server_file", tmp_path, restart_marker=str(marker),
                          files=[dict(dest=str(first), content="x"), dict(dest=str(tmp_path / "no" / "unit"), content="y")])
    assert out["failed"] and "nothing was written" in out["msg"] and str(tmp_path / "no") in out["msg"]
    assert not first.exists() and not marker.exists()


def test_plain_credentials_in_one_call_are_stored_compared_and_removed_each(tmp_path):
    """credentials: several credentials in one module run (needs `systemctl --version`, as above)."""
    directory, marker = tmp_path / "credentials", tmp_path / "m"
    common = dict(directory=str(directory), encrypt="never", restart_marker=str(marker))
    both = [dict(name="api-key", value="sk-one"), dict(name="environment", value='{"HF_TOKEN": "hf-x"}')]
    first = run_module_file("systemd_credential", tmp_path, credentials=both, **common)
    assert first["changed"] and first["restart_marked"], first
    assert sorted(first["credentials"]) == ["api-key", "environment"]
    assert first["credentials"]["api-key"]["directive"] == "LoadCredential"
    assert first["credentials"]["environment"]["path"] == str(directory / "environment")
    assert (directory / "api-key").read_text() == "sk-one"
    assert stat.S_IMODE((directory / "environment").stat().st_mode) == 0o600
    assert str(directory / "api-key") in first["resources"]
    assert "sk-one" not in str(first) and "hf-x" not in str(first)  # suboption value is no_log
    assert len(read(str(marker))) == 2
    again = run_module_file("systemd_credential", tmp_path, credentials=both, **common)
    assert not again["changed"] and not again["restart_marked"] and len(read(str(marker))) == 2
    one_gone = run_module_file("systemd_credential", tmp_path,
                               credentials=[both[0], dict(name="environment", state="absent")], **common)
    assert one_gone["changed"] and not one_gone["credentials"]["api-key"]["changed"]
    assert one_gone["credentials"]["environment"]["path"] is None and not (directory / "environment").exists()
    assert [e["reason"] for e in read(str(marker))][-1] == "credential environment removed"
    bad = run_module_file("systemd_credential", tmp_path,
                          credentials=[dict(name="new", value="x"), dict(name="../etc", value="y")], **common)
    assert bad["failed"] and "must be letters" in bad["msg"] and "Nothing was written" in bad["msg"]
    assert not (directory / "new").exists()
