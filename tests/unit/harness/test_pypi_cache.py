"""tests/support/pypi.py: the cache honours the kind each caller asks for.

Real downloads from PyPI (six 1.16.0, 35 kB: a release with both a wheel and an sdist). The bug this
guards against: the release-table generator cached SGLang 0.5.10.post1's wheel first, and the sglang_build
and sglang_service scenarios, which lay the sdist out as upstream's python/ folder, were then handed the
wheel from the same cache folder.
"""

from __future__ import annotations

import pytest

from support import pypi


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(pypi, "CACHE", tmp_path)
    return tmp_path


def test_a_cached_wheel_does_not_answer_for_the_sdist(empty_cache):
    wheel = pypi.download("six", "1.16.0", prefer="wheel")
    assert wheel.name.endswith(".whl")
    sdist = pypi.download("six", "1.16.0", prefer="sdist")
    assert sdist.name == "six-1.16.0.tar.gz"
    assert sdist.parent == wheel.parent
    assert pypi.download("six", "1.16.0", prefer="wheel") == wheel


def test_a_kind_pypi_lacks_is_remembered_and_the_other_returned(empty_cache):
    folder = empty_cache / "pypi" / "six-1.16.0"
    folder.mkdir(parents=True)
    (folder / ".no-sdist").touch()
    found = pypi.download("six", "1.16.0", prefer="sdist")
    assert found.name.endswith(".whl")
    assert not list(folder.glob("*.tar.gz"))
