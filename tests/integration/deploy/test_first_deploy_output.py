"""A user's first `make deploy` prints nothing the user cannot act on (issue 12).

`make deploy`'s venv has ansible-core alone (requirements.txt): no ansible.posix, no community.*.
The test venv has PyPI's `ansible` bundle, so the run hides the bundle's collections from the
collection loader (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false) to see only what a deploy venv sees. The
production inventory still holds its placeholder address, so the run must stop in preflight with
the message that says what to set, without any warning besides.
"""

from __future__ import annotations

import pathlib

from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_first_deploy_refuses_the_placeholder_and_prints_no_warning(tmp_path):
    # No ANSIBLE_CALLBACKS_ENABLED, no ANSIBLE_CONFIG (run_playbook drops the caller's ANSIBLE_* settings): the
    # project's own ansible.cfg, found in the checkout as `make deploy` finds it, with its inventory and its
    # callback (the terminal output a user reads).
    proc = run_playbook(tmp_path, ROOT / "site.yml", inventory=None, connection=None, args=("-l", "llm-server"),
                        callback="ansible.builtin.default", cwd=ROOT, timeout=300,
                        env={"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false", "ANSIBLE_FORCE_COLOR": "0"})
    output = proc.stdout + proc.stderr
    assert proc.rc == 2, output
    assert '[inventory] ansible_host (llm-server) = "REPLACE_WITH_SERVER_ADDRESS": is still the placeholder' in output
    assert "inventories/production/hosts.yml" in output
    assert "nothing was changed" in output  # refused on the controller (issue 15), before any connection
    warnings = [line for line in output.splitlines() if "WARNING" in line or "DEPRECATION" in line]
    assert warnings == [], warnings
