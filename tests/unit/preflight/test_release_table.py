"""The release table (plugins/module_utils/sglang_release_table.py, generated from PyPI releases) as
preflight uses it before SGLang is built: ref -> release, release -> flags and facts.

Expected values are facts read by hand in the releases (shared sglang-facts.md); the comparison of the
whole table with the releases themselves is tests/integration/service/test_release_table_vs_pypi.py."""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_release_table as data
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import (
    RELEASES, release_table, releases_with, resolve_release)


@pytest.mark.parametrize("ref,expected", [
    ("v0.5.10.post1", ("0.5.10.post1", "exact")), ("0.5.23", ("0.5.23", "exact")),
    ("refs/tags/v0.5.14", ("0.5.14", "exact")),
    ("main", (RELEASES[-1], "branch")), ("3f2a9c1d", (RELEASES[-1], "branch")), ("", (RELEASES[-1], "branch")),
    ("v9.9.9", (RELEASES[-1], "newer")), ("0.5.10.post7", ("0.5.10.post1", "nearest-older")),
    ("v0.4.0", (None, "older")),
])
def test_resolve_release(ref, expected):
    assert resolve_release(ref) == expected


def test_the_table_covers_the_releases_the_facts_name():
    assert RELEASES[0] == "0.5.4" and "0.5.10.post1" in RELEASES and "0.5.14" in RELEASES
    assert list(RELEASES) == sorted(RELEASES, key=lambda r: [int(x) for x in r.replace(".post", ".").split(".")])


def test_release_facts_from_sglang_facts():
    """Spot checks against shared sglang-facts.md (each line there was read in the release's source)."""
    assert release_table("0.5.4").get("--fp4-gemm-backend") is None
    assert set(release_table("0.5.8").choices_of("--fp4-gemm-backend")) == {
        "auto", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm"}
    assert "cutlass" in release_table("0.5.10.post1").choices_of("--fp4-gemm-backend")
    assert releases_with("--fp4-gemm-backend")[0] == "0.5.8"
    assert release_table("0.5.10.post1").get("--flashinfer-allreduce-fusion-backend") is None
    assert release_table("0.5.14").get("--flashinfer-allreduce-fusion-backend") is not None
    # sglang-facts.md says "kimi_k2 (from 0.5.6)"; 0.5.5's parser/reasoning_parser.py already maps
    # "kimi_k2": DeepSeekR1Detector (line 294), so the code's answer is 0.5.5.
    assert "kimi_k2" not in release_table("0.5.4.post3").choices_of("--reasoning-parser")
    assert "kimi_k2" in release_table("0.5.5").choices_of("--reasoning-parser")
    assert "qwen3" not in release_table("0.5.23").choices_of("--tool-call-parser")
    assert release_table("0.5.23").get("--enable-hicache") is release_table("0.5.23").get("--enable-hierarchical-cache")
    assert release_table("0.5.23").get("--tp-size").dest == "tp_size"


def test_quantization_and_gdn_facts():
    """Read by hand: modelopt_quant.py ModelOptFp4Config.get_min_capability() returns 100 in 0.5.10.post1
    and 80 in 0.5.23; ModelOptFp8Config 89; attention_registry.py's SM120 set in 0.5.23 is
    {triton, trtllm_mha, flashinfer}, in 0.5.4 the assert accepts triton only."""
    assert release_table("0.5.10.post1").quant_min_capability["modelopt_fp4"] == 100
    assert release_table("0.5.23").quant_min_capability["modelopt_fp4"] == 80
    assert release_table("0.5.23").quant_min_capability["modelopt_fp8"] == 89
    assert release_table("0.5.4").gdn_blackwell["sm120"] == ["triton"]
    assert set(release_table("0.5.23").gdn_blackwell["sm120"]) == {"triton", "trtllm_mha", "flashinfer"}


def test_every_row_names_known_releases():
    for rows in (data.FLAGS, data.QUANT_MIN_CAPABILITY, data.GDN_BLACKWELL, data.LAYOUTS, data.SUCCESSORS):
        for row in rows:
            for part in row[0].split(","):
                for release in part.split("-"):
                    assert release in RELEASES, row
    for release in RELEASES:
        assert release_table(release).get("--model-path") is not None


def test_every_successor_is_a_flag_of_its_releases():
    """SUCCESSORS rows name a deprecated flag and a flag (=value) both defined in the row's releases."""
    for row in data.SUCCESSORS:
        for part in row[0].split(","):
            for release in part.split("-"):
                table = release_table(release)
                assert table.get(row[1]).deprecated and table.get(row[1]).successor == row[2], row
                assert table.get(row[2].partition("=")[0]) is not None, row
