"""controller_file (plugins/action/controller_file.py): the smoke test's report, written in the controller's
process. The file function on real tmp files, and the action through a real ansible-playbook run."""

import json
import stat

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.gpufleet.llm_server.plugins.action.controller_file import octal, write_file
from support.ansible_harness import run_playbook


def test_write_file_creates_directories_writes_once_and_fixes_the_mode(tmp_path):
    dest = tmp_path / "artifacts" / "smoke-test" / "host-deploy.json"
    assert write_file(str(dest), '{"passed": true}\n', 0o644, 0o755) is True
    assert dest.read_text() == '{"passed": true}\n' and stat.S_IMODE(dest.stat().st_mode) == 0o644
    assert write_file(str(dest), '{"passed": true}\n', 0o644, 0o755) is False  # same content and mode
    dest.chmod(0o600)
    assert write_file(str(dest), '{"passed": true}\n', 0o644, 0o755) is True
    assert stat.S_IMODE(dest.stat().st_mode) == 0o644
    assert write_file(str(dest), '{"passed": false}\n', 0o644, 0o755) is True
    assert dest.read_text() == '{"passed": false}\n'
    assert [p.name for p in dest.parent.iterdir()] == ["host-deploy.json"]  # no temporary file left


def test_octal_names_the_option():
    assert octal("0644", "mode") == 0o644 and octal(0o600, "mode") == 0o600
    with pytest.raises(AnsibleActionFail, match="directory_mode='rwx'"):
        octal("rwx", "directory_mode")


def test_action_writes_in_check_mode_and_never_reports_changed(tmp_path):
    dest = tmp_path / "reports" / "h-deploy.json"
    playbook = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "report", "gpufleet.llm_server.controller_file": {"dest": str(dest), "content": "{{ {'a': 1} | to_json }}\n"},
         "register": "written"},
        {"name": "result", "ansible.builtin.debug": {"msg": "WRITTEN={{ written.written }} CHANGED={{ written.changed }}"}},
    ]}]
    quiet = {"ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
    proc = run_playbook(tmp_path, playbook, check=True, callback="ansible.builtin.default", env=quiet, timeout=300)
    assert proc.rc == 0, proc.stdout[-3000:]
    assert "WRITTEN=True CHANGED=False" in proc.stdout
    assert json.loads(dest.read_text()) == {"a": 1}
    again = run_playbook(tmp_path, playbook, check=True, callback="ansible.builtin.default", env=quiet, timeout=300)
    assert "WRITTEN=False CHANGED=False" in again.stdout, again.stdout[-3000:]
