"""A run limited to the patch tag reads nothing on the host in preflight (preflight_host_pass_skip_tags).

The REAL preflight role (tags.yml) against a host that cannot be reached: its connection is the docker
connection plugin naming a container that does not exist, so any task that touches the host fails (no
network traffic at all; the plugin reports it as a failed task, not an unreachable host).
`--tags sm120-patch` must pass without touching it and still publish the multi-node facts; `--tags model`
(not in the list) must try the host (the negative control: the same inventory fails at the facts), and so
must a `--tags sm120-patch` run with the list emptied.
"""

import pathlib
import uuid

import pytest
import yaml
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
REFERENCE = yaml.safe_load((ROOT / "inventories/production/group_vars/llm_servers/models.yml").read_text())["llm_server_models"]


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tags")
    small = dict(REFERENCE["kimi-k2.5"])
    small.pop("hicache", None)
    host = {"ansible_connection": "community.docker.docker",
            "ansible_host": "gpufleet-test-no-such-container-%s" % uuid.uuid4().hex[:12],
            "ansible_python_interpreter": "/usr/bin/python3",
            "llm_server_models": {"small": small}, "llm_server_model": "small",
            "preflight_flag_release": "0.5.23",
            "llm_server_expected_gpu_count": 8, "llm_server_expected_compute_capability": "12.0"}
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"unreachable-node": host}}}))
    return path


def run(inventory, *args):
    proc = run_playbook(inventory.parent, HERE / "tags.yml", inventory=inventory, connection=None, args=args,
                        env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}, timeout=300)
    result = proc.output
    tasks = {}
    for play in result["plays"]:
        for task in play["tasks"]:
            tasks[task["task"]["name"].split(" : ", 1)[-1]] = task["hosts"]["unreachable-node"]
    return proc, tasks, result["stats"]["unreachable-node"]


def assert_the_facts_tried_the_host(proc, tasks, stats):
    """The docker connection to a missing container fails the first remote task (failed, not unreachable)."""
    assert proc.rc != 0
    assert stats["failures"] + stats["unreachable"] == 1
    facts = tasks["Gather host facts"]
    assert facts.get("failed") or facts.get("unreachable"), facts
    assert "Read GPU facts" not in tasks


def test_a_patch_only_run_reads_nothing_on_the_host(inventory):
    proc, tasks, stats = run(inventory, "--tags", "sm120-patch")
    assert proc.rc == 0, proc.stdout[-3000:]
    assert stats["unreachable"] == 0 and stats["failures"] == 0
    assert tasks["Gather host facts"].get("skipped") is True
    assert tasks["Read GPU facts"].get("skipped") is True
    shown = tasks["Show what preflight left for the patch"]["msg"]
    assert int(shown["nnodes"]) == 1 and int(shown["rank"]) == 0
    assert shown["distribution"] == "undefined"


def test_another_tag_reads_the_host(inventory):
    proc, tasks, stats = run(inventory, "--tags", "model")
    assert_the_facts_tried_the_host(proc, tasks, stats)


def test_an_empty_list_reads_the_host_under_the_patch_tag(inventory):
    proc, tasks, stats = run(inventory, "--tags", "sm120-patch", "-e", '{"preflight_host_pass_skip_tags": []}')
    assert_the_facts_tried_the_host(proc, tasks, stats)
