"""Multi-node facts from the inventory (module_utils/sglang_multinode.py, the preflight action's node_facts).

The expected messages are the fail_msg texts of the preflight role's former tasks/multinode.yml
(git history before issue 20), which these functions replace; docs/fleet.md describes the facts.
"""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_multinode import (
    MultinodeError, as_int, node_facts, rendezvous_host)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import read_memtotal_mb

PROFILES = {"big": {"model_path": "/m", "nnodes": 2, "dist_init_port": 5100, "tp_size": 16},
            "small": {"model_path": "/m", "tp_size": 8}}


def _hosts(**overrides):
    hosts = {"node-b": {"llm_server_model": "big", "ansible_host": "10.0.0.12", "gpu_count": 8},
             "node-a": {"llm_server_model": "big", "ansible_host": "10.0.0.11", "gpu_count": None}}
    for name, values in overrides.items():
        hosts[name].update(values)
    return hosts


GROUPS = {"all": ["node-b", "node-a", "other"], "pair": ["node-b", "node-a"], "ungrouped": []}


def test_single_node_profile_is_rank_0_without_dist_facts():
    assert node_facts("other", "small", PROFILES, None, GROUPS, {}) == {"llm_server_nnodes": 1, "llm_server_node_rank": 0}


def test_rank_follows_the_sorted_inventory_names_not_the_group_order():
    b = node_facts("node-b", "big", PROFILES, "pair", GROUPS, _hosts())
    a = node_facts("node-a", "big", PROFILES, "pair", GROUPS, _hosts())
    assert (a["llm_server_node_rank"], b["llm_server_node_rank"]) == (0, 1)
    for facts in (a, b):
        assert facts["llm_server_nnodes"] == 2
        assert facts["llm_server_dist_init_addr"] == "10.0.0.11:5100"
        assert facts["llm_server_node_gpu_counts"] == [None, 8]  # node-a, node-b; unknown stays None


def test_rendezvous_address_prefers_node_address_then_ansible_host_then_the_name():
    hosts = _hosts(**{"node-a": {"llm_server_node_address": "192.168.7.1"}})
    assert node_facts("node-b", "big", PROFILES, "pair", GROUPS, hosts)["llm_server_dist_init_addr"] == "192.168.7.1:5100"
    hosts = _hosts(**{"node-a": {"ansible_host": None}})
    assert node_facts("node-b", "big", PROFILES, "pair", GROUPS, hosts)["llm_server_dist_init_addr"] == "node-a:5100"
    profiles = {"big": {"nnodes": "2"}}  # from a YAML string, as Jinja's | int read it
    assert node_facts("node-a", "big", profiles, "pair", GROUPS, _hosts())["llm_server_dist_init_addr"] == "10.0.0.11:5000"


def _group_message(host, group_shown, members):
    return ("%s: profile 'big' has nnodes=2, so its hosts must be one inventory group named by llm_server_node_group "
            "(now %s) with exactly 2 hosts, this host among them, all choosing llm_server_model=big (group now: %s). "
            "Fix the group or the profile's nnodes." % (host, group_shown, members))


@pytest.mark.parametrize("group, groups, hosts, shown, members", [
    (None, GROUPS, _hosts(), "unset", []),
    ("nosuch", GROUPS, _hosts(), "nosuch", []),
    ("all", GROUPS, _hosts(), "all", ["node-b", "node-a", "other"]),
    ("pair", GROUPS, _hosts(**{"node-b": {"llm_server_model": "small"}}), "pair", ["node-b", "node-a"]),
    ("pair", dict(GROUPS, pair=["node-b"]), _hosts(), "pair", ["node-b"]),
])
def test_a_group_that_does_not_match_the_profile_is_refused_with_the_old_message(group, groups, hosts, shown, members):
    with pytest.raises(MultinodeError) as err:
        node_facts("node-a", "big", PROFILES, group, groups, hosts)
    assert str(err.value) == _group_message("node-a", shown, members)


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]"])
def test_a_loopback_rendezvous_address_is_refused(address):
    hosts = _hosts(**{"node-a": {"llm_server_node_address": address}})
    with pytest.raises(MultinodeError) as err:
        node_facts("node-b", "big", PROFILES, "pair", GROUPS, hosts)
    assert str(err.value) == (
        "node-b: dist_init_addr %s:5100 is not reachable from the other nodes. Set llm_server_node_address (or "
        "ansible_host) of node-a to its address on the network the nodes share." % address)


def test_an_unknown_profile_names_the_variable():
    with pytest.raises(MultinodeError, match="llm_server_model='nope' names no profile"):
        node_facts("node-a", "nope", PROFILES, "pair", GROUPS, _hosts())


def test_helpers():
    assert [as_int(v) for v in ("2", 2.0, "2.5", "x", None, True)] == [2, 2, 2, 0, 0, 1]
    assert [rendezvous_host(a) for a in ("10.0.0.1:5000", "[fd00::1]:5000", "::1:5000", "host")] == \
        ["10.0.0.1", "fd00::1", "::1", "host"]


def test_memtotal_read_as_the_setup_module_computes_it(tmp_path):
    # The first lines of this machine's /proc/meminfo format (kB), values as a 512 GiB host reports them.
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       528275512 kB\nMemFree:        1000 kB\n")
    assert read_memtotal_mb(str(meminfo)) == 528275512 // 1024
    assert read_memtotal_mb(str(tmp_path / "missing")) == 0
    with open("/proc/meminfo", encoding="ascii") as real:
        kb = int(next(line for line in real if line.startswith("MemTotal:")).split()[1])
    assert read_memtotal_mb() == kb // 1024


def _params(**given):
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import ARGUMENT_SPEC
    result = ArgumentSpecValidator(ARGUMENT_SPEC).validate(given)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def test_run_reads_the_ram_only_on_the_host_and_only_when_not_given(tmp_path, profiles):
    from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import run
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       528275512 kB\n")
    common = {"profile_name": "kimi-k2.5", "profiles": profiles, "flag_release": "none", "read_model_config": False,
              "disk_check": False}
    out, _warnings, _failure = run(_params(**common), meminfo=str(meminfo))
    assert out["ansible_facts"] == {"memtotal_mb": 528275512 // 1024}
    out, _warnings, _failure = run(_params(host_checks=False, **common), meminfo=str(meminfo))
    assert "ansible_facts" not in out
    out, _warnings, _failure = run(_params(memtotal_mb=0, **common), meminfo=str(meminfo))
    assert "ansible_facts" not in out
