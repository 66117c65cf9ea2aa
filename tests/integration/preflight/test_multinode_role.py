"""Multi-node facts through the REAL preflight role (its action works them out from the inventory).

One ansible-playbook run (multinode.yml) over an inventory of local hosts: a two-node group, a host
whose profile wants two nodes but that is in no group, and a group whose rank 0 has a loopback
address. Expected values follow docs/fleet.md (rank = index in the group sorted by inventory name,
rendezvous = rank 0's llm_server_node_address or ansible_host, and the profile's dist_init_port) and
the messages of the role's former tasks/multinode.yml. Nothing runs after preflight.
"""

import copy
import pathlib
import sys

import pytest
import yaml
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
REFERENCE = yaml.safe_load((ROOT / "inventories/production/group_vars/llm_servers/models.yml").read_text())["llm_server_models"]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multinode")
    profile = copy.deepcopy(REFERENCE["kimi-k2.5"])
    profile.update(nnodes=2, tp_size=16, dist_init_port=5123)
    small = copy.deepcopy(REFERENCE["kimi-k2.5"])
    small.pop("hicache", None)  # no host pool to size: the RAM of this machine passes
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "llm_server_models": {"big": profile, "small": small}, "llm_server_model": "big",
              # RAM not read: Kimi's HiCache pool needs the production box's 512 GiB (as in corpus.yml).
              "preflight_gather_facts": False, "preflight_flag_release": "0.5.23",
              "llm_server_expected_gpu_count": 8, "llm_server_expected_compute_capability": "12.0"}
    hosts = {
        "node-b": dict(common, ansible_host="10.0.0.12", llm_server_node_group="pair"),
        "node-a": dict(common, ansible_host="10.0.0.11", llm_server_node_group="pair"),
        "lonely": dict(common, ansible_host="10.0.0.13"),
        "loop-1": dict(common, ansible_host="10.0.0.21", llm_server_node_group="loop"),
        "loop-0": dict(common, ansible_host="10.0.0.20", llm_server_node_address="127.0.0.1",
                       llm_server_node_group="loop"),
        "single": dict(common, ansible_host="10.0.0.30", llm_server_model="small", preflight_gather_facts=True),
    }
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "hosts": hosts,
        "children": {"pair": {"hosts": {"node-b": {}, "node-a": {}}}, "loop": {"hosts": {"loop-1": {}, "loop-0": {}}}},
    }}))
    proc = run_playbook(tmp, HERE / "multinode.yml", inventory=inventory, connection=None,
                        env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    result = proc.output
    failed, shown = {}, {}
    for play in result["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    failed[host] = (task["task"]["name"], res.get("msg", ""))
                if task["task"]["name"] == "Show the multi-node facts":
                    shown[host] = res["msg"]
    return failed, shown, proc


def test_a_two_node_group_gets_ranks_by_sorted_name_and_rank_0s_address(outcome):
    failed, shown, proc = outcome
    assert "node-a" not in failed and "node-b" not in failed, (failed, proc.stderr[-2000:])
    for host, rank in (("node-a", 0), ("node-b", 1)):
        facts = shown[host]
        assert int(facts["nnodes"]) == 2 and int(facts["rank"]) == rank
        assert facts["addr"] == "10.0.0.11:5123"
        assert len(facts["gpus"]) == 2


def test_a_single_node_profile_is_rank_0_and_has_no_rendezvous(outcome):
    failed, shown, _proc = outcome
    assert "single" not in failed, failed.get("single")
    assert int(shown["single"]["nnodes"]) == 1 and int(shown["single"]["rank"]) == 0
    assert shown["single"]["addr"] == "undefined" and shown["single"]["gpus"] == "undefined"


def test_the_host_pass_reads_the_ram_without_hardware_facts(outcome):
    """The setup run gathers no hardware facts now; memtotal_mb comes from the preflight module."""
    _failed, shown, _proc = outcome
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        kb = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
    assert int(shown["single"]["memtotal_mb"]) == kb // 1024
    assert shown["node-a"]["memtotal_mb"] == "undefined"  # preflight_gather_facts false: not read


def test_a_host_outside_any_group_is_refused_before_the_host_checks(outcome):
    failed, _shown, _proc = outcome
    task, msg = failed["lonely"]
    assert task.endswith("Validate the model profile against the host (GPUs, RAM, disk, config.json)")
    assert msg == ("lonely: profile 'big' has nnodes=2, so its hosts must be one inventory group named by "
                   "llm_server_node_group (now unset) with exactly 2 hosts, this host among them, all choosing "
                   "llm_server_model=big (group now: []). Fix the group or the profile's nnodes.")


def test_a_loopback_rendezvous_is_refused_on_every_rank(outcome):
    failed, _shown, _proc = outcome
    for host in ("loop-0", "loop-1"):
        task, msg = failed[host]
        assert task.endswith("Validate the model profile against the host (GPUs, RAM, disk, config.json)")
        assert msg == ("%s: dist_init_addr 127.0.0.1:5123 is not reachable from the other nodes. Set "
                       "llm_server_node_address (or ansible_host) of loop-0 to its address on the network the nodes "
                       "share." % host)
