"""The plan's measured figures, writer to reader: sglang_service's `tasks_from: record_ready` and nvidia_driver's
tasks/record_reboot.yml, run by Ansible on this machine into tmp_path, give the records host_status reads
(fleet_status.read_record) and the plan uses (fleet_plan.host_plan); root-only files, nothing in check mode."""

from __future__ import annotations

import os
import stat
import sys

from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_plan as fp
from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_status as fs
from support.ansible_harness import run_playbook
from support.requires import requires

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: sglang_service records the start-to-ready the smoke test's wait measured
      ansible.builtin.include_role:
        name: gpufleet.llm_server.sglang_service
        tasks_from: record_ready
      vars:
        sglang_service_ready_seconds: 412.34
    - name: nvidia_driver records its reboot (ansible.builtin.reboot's result)
      ansible.builtin.include_role:
        name: gpufleet.llm_server.nvidia_driver
        tasks_from: record_reboot
      vars:
        __nvidia_driver_reboot_result: {changed: true, rebooted: true, elapsed: 95}
        __nvidia_driver_reboot_reasons: [the nvidia module 580.173.02 is loaded, 595.71.05 is installed]
"""


def play(tmp_path, check=False):
    inventory = {"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "llm_server_model": "tiny", "llm_server_models": {"tiny": {"model_path": "/srv/models/tiny"}},
        "sglang_service_state_dir": str(tmp_path / "sglang"), "nvidia_driver_state_dir": str(tmp_path / "driver")}}}}
    (tmp_path / "sglang").mkdir(exist_ok=True)
    return run_playbook(tmp_path, PLAY, inventory=inventory, check=check)


@requires(os.geteuid() != 0, "root (the records are root's files, as on a host)")
def test_records_written_by_the_roles_are_what_status_reads(tmp_path):
    result = play(tmp_path, check=True)
    assert result.rc == 0, result.stdout[-4000:]
    assert not (tmp_path / "sglang" / "start-to-ready.json").exists() and not (tmp_path / "driver").exists()

    result = play(tmp_path)
    assert result.rc == 0, result.stdout[-4000:]
    start = fs.read_record(str(tmp_path / "sglang" / "start-to-ready.json"), "start_to_ready_s")
    reboot = fs.read_record(str(tmp_path / "driver" / "reboot.json"), "reboot_s")
    assert (start["seconds"], start["error"]) == (412.3, None) and start["recorded"].endswith("Z")
    assert (reboot["seconds"], reboot["error"]) == (95.0, None)
    assert stat.S_IMODE(os.stat(tmp_path / "driver").st_mode) == 0o700
    for path in (tmp_path / "sglang" / "start-to-ready.json", tmp_path / "driver" / "reboot.json"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    concerns = {name: fs.concern("ok") for name in fs.CONCERNS}
    concerns["driver"] = fs.concern("pending", ["loaded 580"], reboot_pending=True, reinstall=False)
    concerns["sglang"].update(ref_commit="a" * 40, ref_built=True)
    concerns["smoke"] = {"state": "ok", "detail": [], "start_to_ready_s": 600.0}
    plan = fp.host_plan(concerns, None, {"start_to_ready": start, "reboot": reboot})
    assert (plan["reboot"], plan["downtime_seconds"], plan["start_to_ready_source"], plan["reboot_seconds_source"]) == (
        True, 412.3 + 95.0, "sglang_service", "nvidia_driver")
