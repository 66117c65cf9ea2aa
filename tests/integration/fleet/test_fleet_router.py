"""The sglang_router_worker logic against the real sglang-router binary (PyPI 0.3.2) on loopback.

Workers are the stand-in SGLang (test double; see fleet_helpers). Ports from 32010-32039 (routers' Prometheus
listeners 32510-32539), free at run time and held by one process at a time (tests/support/ports.py).
"""

from __future__ import annotations

import time

import pytest
from fleet_helpers import Router, Worker, chat, http, port_pool

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_router import (
    RouterClient,
    RouterError,
    ensure_worker,
)

PORTS = port_pool(range(32010, 32040))


@pytest.fixture
def port():
    """port() -> a loopback port of this module's range that nothing listens on, this test's until its end."""
    taken = []

    def take() -> int:
        taken.append(PORTS.take())
        return taken[-1]

    yield take
    for number in taken:
        PORTS.release(number)


@pytest.fixture
def two_workers(tmp_path, port):
    with Worker(tmp_path, port()) as w1, Worker(tmp_path, port()) as w2:
        yield w1, w2


def test_add_remove_idempotent_and_traffic(tmp_path, port, two_workers):
    w1, w2 = two_workers
    with Router(tmp_path, port(), [w1.url]) as router:
        client = RouterClient(router.url)
        assert [w["url"] for w in client.workers()] == [w1.url]

        res = ensure_worker(client, w2.url + "/", "present", timeout=60)
        assert res["changed"] is True
        assert res["worker"]["is_healthy"] is True
        assert res["workers"] == sorted([w1.url, w2.url])
        assert res["diff"]["before"]["workers"] == [w1.url]

        again = ensure_worker(client, w2.url, "present", timeout=60)
        assert again["changed"] is False

        before = (w1.chat_count(), w2.chat_count())
        for _request in range(6):
            code, body = chat(router.url)
            assert code == 200 and body["choices"][0]["message"]["content"] == "Paris"
        assert w1.chat_count() - before[0] == 3 and w2.chat_count() - before[1] == 3  # round robin

        gone = ensure_worker(client, w2.url, "absent", drain=True, drain_grace=0.5, timeout=60)
        assert gone["changed"] is True
        assert gone["drain"]["method"] == "grace"  # the stand-in exposes no sglang:* metrics
        assert gone["workers"] == [w1.url]
        before2 = w2.chat_count()
        for _request in range(4):
            assert chat(router.url)[0] == 200
        assert w2.chat_count() == before2, "a removed worker still received traffic"
        assert ensure_worker(client, w2.url, "absent")["changed"] is False


def test_check_mode_changes_nothing(tmp_path, port, two_workers):
    w1, w2 = two_workers
    with Router(tmp_path, port(), [w1.url]) as router:
        client = RouterClient(router.url)
        res = ensure_worker(client, w2.url, "present", check_mode=True)
        assert res["changed"] is True and res["workers"] == sorted([w1.url, w2.url])
        res = ensure_worker(client, w1.url, "absent", check_mode=True)
        assert res["changed"] is True
        time.sleep(1.5)
        assert [w["url"] for w in client.workers()] == [w1.url]


def test_api_key_required_and_used(tmp_path, port):
    with Worker(tmp_path, port(), api_key="k3y") as w1, Worker(tmp_path, port(), api_key="k3y") as w2, \
            Router(tmp_path, port(), [w1.url], api_key="k3y") as router:
        with pytest.raises(RouterError, match="401.*api_key"):
            ensure_worker(RouterClient(router.url), w2.url, "present")
        res = ensure_worker(RouterClient(router.url, api_key="k3y"), w2.url, "present", timeout=60)
        assert res["worker"]["is_healthy"] is True
        assert chat(router.url)[0] == 401
        code, body = chat(router.url, api_key="k3y")
        assert code == 200 and body["choices"][0]["message"]["content"] == "Paris"


def test_bad_url_and_unreachable_worker(tmp_path, port):
    with Worker(tmp_path, port()) as w1, Router(tmp_path, port(), [w1.url]) as router:
        client = RouterClient(router.url)
        with pytest.raises(RouterError, match="http://HOST:PORT"):
            ensure_worker(client, "127.0.0.1:32032/v1", "present")
        # Nothing listens on a port handed out to this test and never bound: the router never marks it
        # healthy; the error says what to check.
        with pytest.raises(RouterError, match="GET /health"):
            ensure_worker(client, f"http://127.0.0.1:{port()}", "present", timeout=4)
        assert http("GET", router.url + "/liveness")[0] == 200


def test_router_unreachable_is_clear(port):
    silent = port()  # handed out to this test, never bound: nothing listens there
    with pytest.raises(RouterError, match=f"GET http://127.0.0.1:{silent}/workers failed"):
        RouterClient(f"http://127.0.0.1:{silent}", timeout=2).workers()
