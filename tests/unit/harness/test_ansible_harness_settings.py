"""tests/support/ansible_harness.py runs playbooks in the test's directory, where the checkout's ansible.cfg is not
found; it names tests/support/harness-ansible.cfg (SPEED_CONFIG) in ANSIBLE_CONFIG instead, which holds the checkout's
settings that change how fast a run is, not what it does. This checks, with ansible-config as a user would, that a
harness run and a run in the checkout see the same values for those settings, that they are not ansible-core's
defaults (so the file does something), and that the file holds no other setting (a behaviour setting there would
make the tests' runs differ from ansible-core's defaults, which the role tests rely on)."""

from __future__ import annotations

import configparser
import json
import pathlib
import subprocess
import sys

from support import ansible_harness

CONFIG_BIN = pathlib.Path(sys.executable).parent / "ansible-config"
# (ini section, key) in the file: ansible-config's name of the setting
SPEED_SETTINGS = {("defaults", "internal_poll_interval"): "DEFAULT_INTERNAL_POLL_INTERVAL",
                  ("defaults", "callbacks_enabled"): "CALLBACKS_ENABLED",
                  ("connection", "pipelining"): "ANSIBLE_PIPELINING"}


def _effective(env: dict[str, str], cwd: pathlib.Path) -> dict[str, object]:
    proc = subprocess.run([str(CONFIG_BIN), "dump", "--format", "json"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=True)
    wanted = set(SPEED_SETTINGS.values())
    return {entry["name"]: entry["value"] for entry in json.loads(proc.stdout) if entry.get("name") in wanted}


def test_the_speed_file_holds_only_the_speed_settings():
    parser = configparser.ConfigParser()
    parser.read(ansible_harness.SPEED_CONFIG, encoding="utf-8")
    keys = {(section, key) for section in parser.sections() for key in parser[section]}
    assert keys == set(SPEED_SETTINGS), keys


def test_harness_runs_use_the_checkout_s_speed_settings(tmp_path):
    harness_env = ansible_harness.ansible_env(tmp_path)
    assert harness_env["ANSIBLE_CONFIG"] == str(ansible_harness.SPEED_CONFIG)
    harness = _effective(harness_env, tmp_path)
    without_file = {key: value for key, value in harness_env.items() if key != "ANSIBLE_CONFIG"}
    checkout = _effective(without_file, ansible_harness.ROOT)
    assert harness == checkout, (harness, checkout)
    assert len(checkout) == len(SPEED_SETTINGS), checkout
    # and each of the checkout's values differs from ansible-core's default
    default = _effective(without_file, tmp_path)
    assert all(default[name] != checkout[name] for name in SPEED_SETTINGS.values()), (default, checkout)


def test_a_test_s_own_config_replaces_the_speed_file(tmp_path):
    own = str(ansible_harness.ROOT / "ansible.cfg")
    assert ansible_harness.ansible_env(tmp_path, ANSIBLE_CONFIG=own)["ANSIBLE_CONFIG"] == own
