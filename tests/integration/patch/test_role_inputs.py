"""Bad settings for sglang_build and sglang_sm120_patch fail first, naming the variable and value.

Runs the real roles with ansible-playbook against localhost in --check mode (so that, should
validation ever let a bad value through, the run still changes nothing on this machine).
"""

from __future__ import annotations

import os
import sys

import pytest

from support.ansible_harness import run_playbook

# The role's first task (gpufleet.llm_server.role_inputs), which preflight makes a no-op in site.yml.
ROLE_INPUTS = "Check the role's variables"


def run(tmp_path, role, variables, check=True):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    playbook = [{"name": "inputs", "hosts": "localhost", "gather_facts": False,
                 "vars": dict(variables, ansible_python_interpreter=python,
                              # the restart-pending marker (issue 17) in the test directory, never /var/lib here
                              sglang_sm120_patch_restart_marker=str(tmp_path / "restart-pending"),
                              model_download_restart_marker=str(tmp_path / "restart-pending")),
                 "roles": [{"role": "gpufleet.llm_server." + role}]}]
    result = run_playbook(tmp_path, playbook, check=check)
    return result.rc, [(name, host) for name, _host_name, host in result.tasks if host.get("failed")]


@pytest.mark.parametrize(
    "role, variables, task, words",
    [
        ("sglang_build", {"sglang_build_dependency_drift": "fast"}, "Validating arguments",
         ["sglang_build_dependency_drift", "fast", "install, fail, warn"]),
        ("sglang_build", {"sglang_build_torch_install": "always"}, "Validating arguments",
         ["sglang_build_torch_install", "always", "if-missing, never, replace"]),
        ("sglang_build", {"sglang_build_install_mode": "full"}, ROLE_INPUTS,
         ["sglang_build_install_mode", "no longer exist", "sglang_build_torch_install"]),
        ("sglang_build", {"sglang_build_checkout_dir": "/opt/sglang/src", "sglang_build_verify_import": False},
         ROLE_INPUTS,
         ["sglang_build_checkout_dir", "sglang_build_verify_import", "sglang_build_verify_modules"]),
        ("sglang_build", {"sglang_build_dir": "opt/sglang"}, ROLE_INPUTS,
         ["sglang_build_dir=opt/sglang", "absolute"]),
        ("sglang_build", {"sglang_build_keep_builds": 0}, ROLE_INPUTS,
         ["sglang_build_keep_builds=0", "at least 1"]),
        ("sglang_build", {"sglang_build_python": "/usr/local/python3"}, ROLE_INPUTS,
         ["sglang_build_python must be VENV/bin/python", "/usr/local/python3"]),
        ("sglang_build", {"sglang_build_extra_pip_packages": ["--pre"]}, ROLE_INPUTS,
         ["sglang_build_extra_pip_packages", "--pre", "sglang_build_pip_args"]),
        ("sglang_sm120_patch", {"sglang_sm120_patch_target_dir": "sglang"}, ROLE_INPUTS,
         ["sglang_sm120_patch_target_dir must be an absolute path (got sglang)"]),
        ("sglang_sm120_patch", {"sglang_sm120_patch_patches": [{"name": "x", "file": "a.py", "symbol": "X"}]},
         "Validating arguments", ["entries"]),
    ],
)
def test_bad_settings_fail_first_with_the_fix(tmp_path, role, variables, task, words):
    rc, failed = run(tmp_path, role, variables)
    assert rc != 0 and len(failed) == 1
    name, result = failed[0]
    assert task in name
    for word in words:
        assert word in result["msg"], result["msg"]


def test_missing_target_fails_outside_check_mode(tmp_path):
    """Normal mode (in check mode a missing target means "not built yet" and is only reported)."""
    target = tmp_path / "no-such-sglang"
    rc, failed = run(tmp_path, "sglang_sm120_patch", {"sglang_sm120_patch_target_dir": str(target)}, check=False)
    assert rc != 0 and len(failed) == 1
    name, result = failed[0]
    assert "Refuse a target" in name
    assert "sglang_sm120_patch_target_dir=%s is not a directory" % target in result["msg"]
    assert "--tags sglang-build" in result["msg"]
    assert not target.exists()


def run_plays(tmp_path, plays, check=True):
    """Run PLAYS (lists of tasks on localhost) and return (rc, [(task name, host result), ...])."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    playbook = [{"name": "play %d" % number, "hosts": "localhost", "gather_facts": False,
                 "vars": dict(play.get("vars", {}), ansible_python_interpreter=python,
                              sglang_sm120_patch_restart_marker=str(tmp_path / "restart-pending")),
                 "tasks": play["tasks"]} for number, play in enumerate(plays)]
    result = run_playbook(tmp_path, playbook, check=check)
    return result.rc, [(name, host) for name, _host_name, host in result.tasks]


def test_every_problem_of_every_role_in_one_failure(tmp_path):
    """As preflight calls it: one task, three roles, four bad values (two in one role)."""
    rc, results = run_plays(tmp_path, [{
        "vars": {"sglang_build_keep_builds": 0, "sglang_build_install_mode": "full", "cuda_toolkit_version": "13",
                 "sglang_sm120_patch_target_dir": "sglang"},
        "tasks": [{"name": "check", "gpufleet.llm_server.role_inputs": {
            "roles": ["gpufleet.llm_server.sglang_build", "cuda_toolkit", "sglang_sm120_patch"]}}]}])
    assert rc != 0
    [(name, result)] = results
    assert result["failed"]
    assert set(result["problems"]) == {"sglang_build", "cuda_toolkit", "sglang_sm120_patch"}
    assert len(result["problems"]["sglang_build"]) == 2
    for words in ["4 problems in the roles' variables (nothing was changed", "- sglang_build: ['sglang_build_install_mode']",
                  "sglang_build_keep_builds=0 must be at least 1", "- cuda_toolkit: cuda_toolkit_version is '13'",
                  "- sglang_sm120_patch: sglang_sm120_patch_target_dir must be an absolute path (got sglang)"]:
        assert words in result["msg"], result["msg"]
    assert "ansible_facts" not in result


def test_checked_roles_skip_their_own_check_and_deferred_ones_do_not(tmp_path):
    """The site.yml pattern: a first play checks (preflight), a later play imports the role with rolespec_validate
    false; the role's own check is skipped when the role was checked. A value that follows a variable set later
    (sglang_build_source_dir, set by sglang_build) is left to the role, which then checks the real value."""
    play_vars = {"sglang_sm120_patch_target_dir": "{{ later_dir }}/sglang"}
    checking = {"vars": play_vars, "tasks": [{"name": "preflight check", "gpufleet.llm_server.role_inputs": {
        "roles": ["sglang_sm120_patch", "cuda_toolkit"], "defer_undefined": True}}]}
    importing = {"vars": play_vars, "tasks": [
        {"name": "set later", "ansible.builtin.set_fact": {"later_dir": "relative"}},
        {"name": "patch", "ansible.builtin.import_role": {"name": "gpufleet.llm_server.sglang_sm120_patch",
                                                          "rolespec_validate": False}}]}
    rc, results = run_plays(tmp_path, [checking, importing])
    first = results[0][1]
    assert first["checked"] == ["cuda_toolkit"]
    assert list(first["deferred"]) == ["sglang_sm120_patch"]
    assert first["ansible_facts"]["gpufleet_llm_server_checked_roles"] == ["cuda_toolkit"]
    assert rc != 0
    own = [(name, result) for name, result in results if ROLE_INPUTS in name]
    # cuda_toolkit's own check is not even reached (when: false); the patch role's runs and refuses "relative/sglang".
    [(name, result)] = own
    assert result["failed"]
    assert "sglang_sm120_patch_target_dir must be an absolute path (got relative/sglang)" in result["msg"]


def test_a_checked_role_skips_its_check(tmp_path):
    tasks = [{"name": "check", "gpufleet.llm_server.role_inputs": {"roles": ["sglang_sm120_patch"]}},
             {"name": "patch", "ansible.builtin.import_role": {"name": "gpufleet.llm_server.sglang_sm120_patch",
                                                               "rolespec_validate": False}}]
    rc, results = run_plays(tmp_path, [{"vars": {"sglang_sm120_patch_target_dir": str(tmp_path / "absent")},
                                        "tasks": tasks}])
    assert rc == 0, results
    own = [result for name, result in results if ROLE_INPUTS in name]
    assert len(own) == 1 and own[0].get("skipped") is True
    assert results[0][1]["ansible_facts"]["gpufleet_llm_server_checked_roles"] == ["sglang_sm120_patch"]


def test_a_role_run_alone_checks_itself_every_time(tmp_path):
    """Without preflight the role checks its variables at each include and records nothing: a second include with
    other variables in the same run is checked again (and refused here)."""
    include = {"name": "patch", "ansible.builtin.include_role": {"name": "gpufleet.llm_server.sglang_sm120_patch"}}
    tasks = [dict(include, vars={"sglang_sm120_patch_target_dir": str(tmp_path / "absent")}),
             dict(include, vars={"sglang_sm120_patch_target_dir": "relative"})]
    rc, results = run_plays(tmp_path, [{"tasks": tasks}])
    own = [result for name, result in results if ROLE_INPUTS in name]
    assert rc != 0 and len(own) == 2
    assert own[0]["checked"] == ["sglang_sm120_patch"] and "ansible_facts" not in own[0]
    assert own[1]["failed"] and "(got relative)" in own[1]["msg"]
