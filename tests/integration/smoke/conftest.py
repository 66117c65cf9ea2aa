"""Fixtures for the smoke-test integration tests (helpers in smoke_helpers.py)."""

from __future__ import annotations

import pytest
from smoke_helpers import Standin


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
