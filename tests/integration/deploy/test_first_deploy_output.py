"""A user's first `make deploy` prints nothing the user cannot act on (issue 12).

`make deploy`'s venv has ansible-core alone (requirements.txt): no ansible.posix, no community.*.
The test venv has PyPI's `ansible` bundle, so the run hides the bundle's collections from the
collection loader (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false) to see only what a deploy venv sees. The
production inventory still holds its placeholder address, so the run must stop in preflight with
the message that says what to set, without any warning besides.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_first_deploy_refuses_the_placeholder_and_prints_no_warning():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    env.pop("ANSIBLE_CONFIG", None)  # the project's own ansible.cfg, as `make deploy` uses it
    playbook = pathlib.Path(sys.executable).with_name("ansible-playbook")
    proc = subprocess.run([str(playbook), "site.yml", "-l", "llm-server"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert '[inventory] ansible_host (llm-server) = "REPLACE_WITH_SERVER_ADDRESS": is still the placeholder' in output
    assert "inventories/production/hosts.yml" in output
    assert "nothing was changed" in output  # refused on the controller (issue 15), before any connection
    warnings = [line for line in output.splitlines() if "WARNING" in line or "DEPRECATION" in line]
    assert warnings == [], warnings
