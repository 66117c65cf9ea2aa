"""Bad settings for sglang_build and sglang_sm120_patch fail first, naming the variable and value.

Runs the real roles with ansible-playbook against localhost in --check mode (so that, should
validation ever let a bad value through, the run still changes nothing on this machine).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run(tmp_path, role, variables, check=True):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    playbook = [{"name": "inputs", "hosts": "localhost", "gather_facts": False,
                 "vars": dict(variables, ansible_python_interpreter=python,
                              # the restart-pending marker (issue 17) in the test directory, never /var/lib here
                              sglang_sm120_patch_restart_marker=str(tmp_path / "restart-pending"),
                              model_download_restart_marker=str(tmp_path / "restart-pending")),
                 "roles": [{"role": "gpufleet.llm_server." + role}]}]
    (tmp_path / "play.yml").write_text(json.dumps(playbook))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", *(["--check"] if check else []), str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    out = json.loads(proc.stdout[proc.stdout.index("{"):])
    failed = [(t["task"]["name"], h) for p in out["plays"] for t in p["tasks"]
              for h in t["hosts"].values() if h.get("failed")]
    return proc.returncode, failed


@pytest.mark.parametrize(
    "role, variables, task, words",
    [
        ("sglang_build", {"sglang_build_dependency_drift": "fast"}, "Validating arguments",
         ["sglang_build_dependency_drift", "fast", "install, fail, warn"]),
        ("sglang_build", {"sglang_build_torch_install": "always"}, "Validating arguments",
         ["sglang_build_torch_install", "always", "if-missing, never, replace"]),
        ("sglang_build", {"sglang_build_install_mode": "full"}, "Refuse settings of the old single-checkout layout",
         ["sglang_build_install_mode", "no longer exist", "sglang_build_torch_install"]),
        ("sglang_build", {"sglang_build_checkout_dir": "/opt/sglang/src", "sglang_build_verify_import": False},
         "Refuse settings of the old single-checkout layout",
         ["sglang_build_checkout_dir", "sglang_build_verify_import", "sglang_build_verify_modules"]),
        ("sglang_build", {"sglang_build_dir": "opt/sglang"}, "Refuse unusable build settings",
         ["sglang_build_dir=opt/sglang", "absolute"]),
        ("sglang_build", {"sglang_build_keep_builds": 0}, "Refuse unusable build settings",
         ["sglang_build_keep_builds=0", "at least 1"]),
        ("sglang_build", {"sglang_build_python": "/usr/local/python3"}, "Refuse unusable build settings",
         ["sglang_build_python must be VENV/bin/python", "/usr/local/python3"]),
        ("sglang_build", {"sglang_build_extra_pip_packages": ["--pre"]}, "Refuse requirement lists",
         ["sglang_build_extra_pip_packages", "--pre", "sglang_build_pip_args"]),
        ("sglang_sm120_patch", {"sglang_sm120_patch_target_dir": "sglang"}, "Check the patch settings",
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
