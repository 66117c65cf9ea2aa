"""The sglang_router role's inputs computed in module_utils.sglang_router (worker URLs, loopback refusal, argv)."""

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_router import (
    ROUTER_OPTIONS,
    loopback_workers,
    router_argv,
    unique_worker_urls,
    worker_urls,
)

MODELS = {"p1": {"port": 30000, "host": "0.0.0.0"}, "p2": {"port": 31000}, "lo": {"port": 30001}}

HOSTS = [
    ("a", {"ansible_host": "10.0.0.1", "llm_server_model": "p1", "llm_server_models": MODELS}),
    ("b", {"ansible_host": "10.0.0.2", "llm_server_model": "p2", "llm_server_models": MODELS, "llm_server_node_rank": 1}),
    ("c", {"llm_server_model": "p2", "llm_server_models": MODELS, "sglang_router_worker_url": "http://c.example:9/"}),
    ("d", {"ansible_host": "10.0.0.4", "llm_server_model": "p1", "llm_server_models": MODELS,
           "sglang_router_worker_enabled": False}),
    ("e", {"llm_server_model": "p2", "llm_server_models": MODELS, "sglang_router_worker_address": "10.0.0.5",
           "llm_server_node_rank": "0", "sglang_router_worker_enabled": "yes"}),
    ("f", {}),
]


def test_worker_urls_one_per_enabled_node_zero():
    assert worker_urls(HOSTS) == ["http://10.0.0.1:30000", "http://c.example:9/", "http://10.0.0.5:31000",
                                  "http://f:30000"]


def test_worker_enabled_reads_like_the_bool_filter():
    assert worker_urls([("x", {"sglang_router_worker_enabled": "False"})]) == []
    assert worker_urls([("x", {"sglang_router_worker_enabled": "on"})]) == ["http://x:30000"]


def test_loopback_workers_names_hosts_the_router_cannot_reach():
    # p2 and the empty host have no profile host (127.0.0.1); c has its own URL; d is disabled.
    assert loopback_workers(HOSTS, router_host="r") == ["b", "e", "f"]


def test_loopback_workers_skip_the_router_host_and_loopback_addresses():
    hosts = [("e", HOSTS[4][1]), ("g", {"ansible_host": "127.0.0.1"}), ("h", {"sglang_router_worker_address": "::1"})]
    assert loopback_workers(hosts, router_host="e") == []


def test_unique_worker_urls_strip_slashes_and_keep_first_order():
    assert unique_worker_urls(["http://b:1//", "http://a:1", "http://b:1"]) == ["http://b:1", "http://a:1"]


def options():
    return {name: index for index, name in enumerate(ROUTER_OPTIONS)}


def test_router_argv_orders_options_then_workers_then_extra_args():
    argv = router_argv("/v/bin/python", options(), ["http://a:1/", "http://a:1"], ["--x", 5])
    assert argv[:5] == ["/v/bin/python", "-m", "sglang_router.launch_router", "--host", "0"]
    assert argv[5:7] == ["--port", "1"]
    assert argv[-6:] == ["--log-level", "13", "--worker-urls", "http://a:1", "--x", "5"]
    assert len(argv) == 3 + 2 * len(ROUTER_OPTIONS) + 2 + 2


def test_router_argv_without_workers_has_no_worker_urls_flag():
    argv = router_argv("/v/bin/python", options(), [], [])
    assert "--worker-urls" not in argv
    assert all(isinstance(arg, str) for arg in argv)
