"""Multi-node tensor parallel: argv rendering and the tp-vs-GPUs rule across nodes."""

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight import Context, validate
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import render

PROFILE = {"model_path": "/m", "served_model_name": "m", "tp_size": 16, "nnodes": 2, "dist_init_port": 5000,
           "host": "0.0.0.0", "port": 30000}


def _node(rank, gpus=(8, 8)):
    return {"nnodes": 2, "node_rank": rank, "dist_init_addr": "10.0.0.11:5000", "gpu_counts": list(gpus)}


def test_every_rank_gets_the_same_flags_and_its_rank():
    argvs = [render(PROFILE, node=_node(r))["argv"] for r in (0, 1)]
    for rank, argv in enumerate(argvs):
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.11:5000"
    strip = [a[:a.index("--node-rank")] + a[a.index("--node-rank") + 2:] for a in argvs]
    assert strip[0] == strip[1]


def test_single_node_renders_no_dist_flags():
    argv = render(dict(PROFILE, nnodes=1, tp_size=8))["argv"]
    assert "--nnodes" not in argv and "--dist-init-addr" not in argv and "--node-rank" not in argv


def _errors(profile, node, gpu_count=8):
    ctx = Context("p", {"p": profile}, facts={"gpu_count": gpu_count}, node=node)
    return [e for e in validate(ctx)["errors"] if e["rule"] == "tp-vs-gpus"]


def test_tp_across_nodes_accepted():
    assert _errors(PROFILE, _node(0)) == []


def test_tp_not_a_multiple_of_nnodes_refused():
    errs = _errors(dict(PROFILE, tp_size=15), _node(0))
    assert errs and "multiple of nnodes" in errs[0]["reason"] and "tp_size" in errs[0]["variable"]


def test_tp_more_than_gpus_of_all_nodes_refused():
    errs = _errors(dict(PROFILE, tp_size=32), _node(1, gpus=(8, 8)))
    assert errs and "16" in errs[0]["reason"]


def test_a_node_with_too_few_gpus_refused():
    errs = _errors(PROFILE, _node(1, gpus=(8, 4)), gpu_count=4)
    assert errs and "node" in errs[0]["reason"]


def test_without_node_facts_only_this_hosts_gpus_count():
    ctx = Context("p", {"p": PROFILE}, facts={"gpu_count": 8})
    assert [e for e in validate(ctx)["errors"] if e["rule"] == "tp-vs-gpus"] == []
    assert "--node-rank" not in validate(ctx)["argv"]  # no rank known: nothing multi-node rendered
    errs = _errors(dict(PROFILE, tp_size=32), None)
    assert errs and "needs 16 GPUs per node" in errs[0]["reason"]
