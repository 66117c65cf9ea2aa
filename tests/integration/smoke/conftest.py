"""Fixtures for the smoke-test integration tests (helpers in smoke_helpers.py)."""

from __future__ import annotations

import pytest
from smoke_helpers import Standin, free_port, release_port
from support.sglang_replay import ReplayServer


@pytest.fixture
def standin(tmp_path):
    started = []

    def start(mode: str = "ok", **kwargs) -> Standin:
        server = Standin(tmp_path, mode, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def replay():
    """start(behaviour, **kwargs) -> a running ReplayServer (tests/support/sglang_replay.py) on a free port."""
    started = []

    def start(behaviour: str = "healthy", **kwargs) -> ReplayServer:
        server = ReplayServer(free_port(), behaviour, **kwargs).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)
        release_port(server.port)
