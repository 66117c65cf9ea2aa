"""Shared pytest setup: make `ansible_collections.gpufleet.llm_server` importable from the checkout.

`make venv` links this checkout at .collections/ansible_collections/gpufleet/llm_server; the
collection's module_utils are imported by their real FQCN path, exactly as Ansible imports them.
"""

import copy
import os
import pathlib
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".collections"
LINK = COLLECTIONS / "ansible_collections" / "gpufleet" / "llm_server"
if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(ROOT, LINK)
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))


# Fixtures shared by the preflight unit tests and the service integration tests: the shipped
# reference profiles and the facts of the production box.
MODELS = ROOT / "inventories" / "production" / "group_vars" / "llm_servers" / "models.yml"


@pytest.fixture
def profiles():
    return copy.deepcopy(yaml.safe_load(MODELS.read_text())["llm_server_models"])


@pytest.fixture
def sm120_host():
    """Injected facts: what gpu_info + setup report on the production box (8 x RTX PRO 6000, 512 GiB)."""
    gpu = {"kind": "gpu", "compute_capability": "12.0", "memory_total_mib": 97887, "name": "RTX PRO 6000"}
    audio = {"kind": "audio"}
    return {"gpu_count": 8, "devices": [dict(gpu, index=i) for i in range(8)] + [audio], "memtotal_mb": 512 * 1024}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed while the CPU test engine died says so first: the cause is the engine.

    Lesson (issue 12): a segfaulting engine showed up as smoke-module failures ("the server does not
    answer ... check host/port"), which sent the reader after the module instead of the build.
    """
    report = yield
    if report.failed and "support.llama_engine" in sys.modules:
        crashed = sys.modules["support.llama_engine"].crashed_servers()
        if crashed:
            banner = "INFRASTRUCTURE ERROR, not a failure of the code under test:\n" + "\n".join(crashed)
            report.longrepr = f"{banner}\n\n{report.longrepr}"
            report.sections.insert(0, ("CPU test engine", banner))
    return report
