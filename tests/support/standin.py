"""The stand-in SGLang engine (tests/support/standin_sglang, a test double for a model that cannot run here)
installed with pip into a cached venv, shared by the service and fleet tests."""

from __future__ import annotations

import os
import pathlib
import shutil

from support import pypi

STANDIN_SRC = pathlib.Path(__file__).resolve().parent / "standin_sglang"


def standin_python() -> pathlib.Path:
    """The Python of a venv ($GPUFLEET_CACHE) with the stand-in installed by pip, rebuilt when its source changes."""
    # A fresh copy: pip builds in place (build/, *.egg-info) and must not write into the checkout's tree.
    stamp = int(max(p.stat().st_mtime for p in (STANDIN_SRC / "sglang").rglob("*.py")))
    copy = pypi.CACHE / "src" / f"standin-sglang-{stamp}"
    if not copy.exists():
        tmp = copy.with_suffix(f".tmp{os.getpid()}")
        shutil.copytree(STANDIN_SRC, tmp, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        try:
            os.replace(tmp, copy)
        except OSError:  # another process (a pytest-xdist worker) made the same copy first
            shutil.rmtree(tmp)
            if not copy.exists():
                raise
    return pypi.cached_venv(f"standin-sglang-{stamp}", [str(copy)])[0]
