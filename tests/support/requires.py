"""Fail, never skip, a test whose tools are missing: a skipped test proves nothing.

`make test` runs as root on Debian with dpkg, apt, gpg and runuser (scripts/test.sh's setup), so every
requirement below holds there; elsewhere the test fails and says what it needs.
"""

from __future__ import annotations

import functools

import pytest


def requires(missing: bool, what: str):
    """Decorator: the test fails with `what` when `missing` is true (evaluated at import)."""
    def wrap(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            if missing:
                pytest.fail(f"this test needs {what}; run it where make test runs (root on Debian)", pytrace=False)
            return test(*args, **kwargs)
        return run
    return wrap


def require_for_module(missing: bool, what: str) -> None:
    """The same for a whole test module: fails its collection."""
    if missing:
        pytest.fail(f"these tests need {what}; run them where make test runs (root on Debian)", pytrace=False)
