"""Shared fixtures for preflight tests: the shipped reference profiles and an 8 x SM120, 512 GiB host."""

import copy
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
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
