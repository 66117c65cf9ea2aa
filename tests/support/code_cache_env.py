"""The environment that turns the payload code cache on for the Pythons a test run starts on this machine (issue 36;
tests/support/ansiballz_code_cache/ says what the cache is and why). One place for the two callers:
tests/support/ansible_harness.py (the tests' playbooks) and scripts/molecule_scenarios.py (Molecule's controller)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "support" / "ansiballz_code_cache"  # its sitecustomize.py installs the hook
CACHE_DIR = ROOT / "tests" / "output" / "ansiballz-code"  # shared by all xdist workers and scenarios of a run


def with_code_cache(base: Mapping[str, str]) -> dict[str, str]:
    """BASE with the hook's directory first on PYTHONPATH and the cache's directory in GPUFLEET_ANSIBALLZ_CODE_CACHE."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(SITE), env.get("PYTHONPATH"))))
    env["GPUFLEET_ANSIBALLZ_CODE_CACHE"] = str(CACHE_DIR)
    return env
