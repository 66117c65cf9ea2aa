"""benchmarks/callback_plugins/cpu_ledger.py on a real play: one line per task, in order, with the CPU it cost.

ansible-playbook on localhost (connection local, files in tmp_path only), through tests/support/ansible_harness.py.
"""

from __future__ import annotations

import json
import pathlib
import sys

from support.ansible_harness import run_playbook

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"


def test_one_line_per_task_with_the_cpu_it_cost(tmp_path):
    ledger = tmp_path / "cpu.jsonl"
    burn = "import hashlib; [hashlib.sha256(b'x' * 1000).digest() for _ in range(300000)]"
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Cheap", "ansible.builtin.set_fact": {"x": 1}},
        # Runs in a child of ansible-playbook: counted as the children's CPU.
        {"name": "Burn CPU in a child", "ansible.builtin.command": {"argv": [sys.executable, "-c", burn]},
         "changed_when": False},
        {"name": "Skipped", "ansible.builtin.debug": {"msg": "x"}, "when": False},
    ]}]
    result = run_playbook(tmp_path, json.dumps(play), env={
        "ANSIBLE_CALLBACK_PLUGINS": str(BENCHMARKS / "callback_plugins"), "ANSIBLE_CALLBACKS_ENABLED": "cpu_ledger",
        "GPUFLEET_CPU_LEDGER": str(ledger)}, args=("-e", f"ansible_python_interpreter={sys.executable}"))
    assert result.rc == 0, result.stdout + result.stderr
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["task"] for e in entries] == ["Cheap", "Burn CPU in a child", "Skipped"]
    assert [e["status"] for e in entries] == ["ok", "ok", "skipped"]
    assert all(e["self"] >= 0 and e["children"] >= 0 and e["wall"] >= 0 for e in entries)
    # The burning task's worker (and its command) is reaped by the time the next task starts, or at the end.
    burned = entries[1]["children"] + entries[2]["children"]
    assert burned > 0.2 and burned > 5 * entries[0]["children"], entries
