"""tests/support/ansible_harness.py runs playbooks in the test's directory, where the checkout's ansible.cfg is not
found; it sets the cfg's speed settings itself (PROJECT_SPEED_SETTINGS). This checks, with ansible-config as a user
would, that a harness run and a run in the checkout see the same values, so the two cannot drift apart."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from support import ansible_harness

CONFIG_BIN = pathlib.Path(sys.executable).parent / "ansible-config"
SETTINGS = {"ANSIBLE_PIPELINING": "ANSIBLE_PIPELINING"}  # environment variable: ansible-config's name


def _effective(env: dict[str, str], cwd: pathlib.Path) -> dict[str, object]:
    proc = subprocess.run([str(CONFIG_BIN), "dump", "--format", "json"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=True)
    return {entry["name"]: entry["value"] for entry in json.loads(proc.stdout) if entry.get("name") in SETTINGS.values()}


def test_harness_runs_use_the_checkout_s_speed_settings(tmp_path):
    assert set(ansible_harness.PROJECT_SPEED_SETTINGS) == set(SETTINGS)
    harness = _effective(ansible_harness.ansible_env(tmp_path), tmp_path)
    checkout_env = {key: value for key, value in ansible_harness.ansible_env(tmp_path).items()
                    if key not in SETTINGS}
    checkout = _effective(checkout_env, ansible_harness.ROOT)
    assert harness == checkout, (harness, checkout)
    # and the checkout's values are not ansible-core's defaults (no pipelining)
    default = _effective(checkout_env, tmp_path)
    assert default != checkout, default
