"""sglang_router role: worker URLs from the inventory, and refusals before any host change.

Runs real ansible-playbook against localhost (connection local); the refusals happen in the role's
first tasks, so nothing on this machine is changed.
"""

from __future__ import annotations

import json
import pathlib
import sys

from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]

INVENTORY = {
    "all": {"children": {
        "llm_servers": {
            "hosts": {
                "a": {"ansible_host": "10.0.0.1", "llm_server_model": "p1"},
                "b": {"ansible_host": "10.0.0.2", "llm_server_model": "p2", "llm_server_node_rank": 1},
                "c": {"llm_server_model": "p2", "sglang_router_worker_url": "http://c.example:9/"},
                "d": {"ansible_host": "10.0.0.4", "llm_server_model": "p1", "sglang_router_worker_enabled": False},
            },
            "vars": {"llm_server_models": {"p1": {"port": 30000, "host": "0.0.0.0"},
                                           "p2": {"port": 31000, "host": "0.0.0.0"}}},
        },
        "sglang_routers": {"hosts": {"r": {"ansible_connection": "local",
                                           "ansible_python_interpreter": sys.executable}}},
    }}
}


def _run(tmp_path, play, inventory=None, extra=()):
    result = run_playbook(tmp_path, play, inventory=INVENTORY if inventory is None else inventory, connection=None,
                          args=tuple(extra))
    return result


def test_worker_urls_from_the_group(tmp_path):
    play = f"""
- hosts: r
  gather_facts: false
  vars_files: [{ROOT}/roles/sglang_router/defaults/main.yml]
  tasks:
    - ansible.builtin.debug: {{var: sglang_router_worker_urls}}
"""
    proc = _run(tmp_path, play)
    assert proc.rc == 0, proc.stdout[-2000:]
    # b is multi-node rank 1 (no HTTP API), d opted out, c set its own URL.
    assert proc.host_results("r")[0]["sglang_router_worker_urls"] == ["http://10.0.0.1:30000", "http://c.example:9/"]


ROLE_PLAY = """
- hosts: r
  gather_facts: false
  roles:
    - role: gpufleet.llm_server.sglang_router
"""


def test_refuses_loopback_workers_on_other_hosts(tmp_path):
    inv = json.loads(json.dumps(INVENTORY))
    inv["all"]["children"]["llm_servers"]["vars"]["llm_server_models"]["p1"]["host"] = "127.0.0.1"
    proc = _run(tmp_path, ROLE_PLAY, inv, ["--check"])
    assert proc.rc != 0
    failed = [r for r in proc.host_results("r") if r.get("failed")]
    assert "['a']" in failed[0]["msg"] and "0.0.0.0" in failed[0]["msg"]


def test_refuses_empty_worker_list_and_bad_urls(tmp_path):
    proc = _run(tmp_path, ROLE_PLAY, extra=["--check", "-e", "sglang_router_worker_group=nobody"])
    assert proc.rc != 0
    msg = [r for r in proc.host_results("r") if r.get("failed")][0]["msg"]
    assert "must not be empty" in msg and "sglang_router_allow_no_workers" in msg
    proc = _run(tmp_path, ROLE_PLAY, extra=["--check", "-e", '{"sglang_router_worker_urls": ["http://x:1/v1"]}'])
    msg = [r for r in proc.host_results("r") if r.get("failed")][0]["msg"]
    assert "http://HOST:PORT without a path" in msg


def test_refuses_a_bad_policy_by_argument_spec(tmp_path):
    proc = _run(tmp_path, ROLE_PLAY, extra=["--check", "-e", "sglang_router_policy=fastest"])
    assert proc.rc != 0
    msg = [r for r in proc.host_results("r") if r.get("failed")][0]["msg"]
    assert "sglang_router_policy" in msg and "fastest" in msg
