"""Pure logic of module_utils.sglang_router (no network)."""

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_router import (
    RouterClient,
    RouterError,
    _metric_sum,
    normalize_url,
)


def test_normalize_url():
    assert normalize_url(" http://a:1/ ") == "http://a:1"


def test_metric_sum_reads_running_and_queued():
    text = (
        "# HELP sglang:num_running_reqs x\n"
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0\n'
        'sglang:num_queue_reqs{model_name="m"} 2\n'
        "sglang:gen_throughput 99\n"
    )
    assert _metric_sum(text, ("sglang:num_running_reqs", "sglang:num_queue_reqs")) == 5.0
    assert _metric_sum("# nothing\n", ("sglang:num_running_reqs",)) is None


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_drain_waits_for_running_requests_then_fails_with_fix():
    clock = FakeClock()
    client = RouterClient("http://r:1", sleep=clock.sleep, clock=clock)
    seq = iter([2, 1, 0])
    client.running_requests = lambda url, key=None: next(seq)
    assert client.drain("http://w:1", timeout=30, grace=5)["method"] == "metrics"
    assert clock.now == 2.0

    client.running_requests = lambda url, key=None: 4
    try:
        client.drain("http://w:1", timeout=3, grace=5)
    except RouterError as exc:
        assert "drain_timeout" in str(exc) and "4" in str(exc)
    else:
        raise AssertionError("drain did not fail")


def test_drain_without_metrics_uses_grace():
    clock = FakeClock()
    client = RouterClient("http://r:1", sleep=clock.sleep, clock=clock)
    client.running_requests = lambda url, key=None: None
    assert client.drain("http://w:1", timeout=30, grace=7)["method"] == "grace"
    assert clock.now == 7
