"""Rules that need the host or SGLang's per-release facts: quantization vs compute capability, hybrid
GDN backends (attention, prefill, decode), FP4 GEMM on SM120, context length vs the model, free disk.

Per-release facts come from the release table (generated from PyPI releases; its extraction is pinned
to hand-read source lines in tests/integration/service/test_release_table_vs_pypi.py). Disk figures are read
from a real filesystem (tmp_path) by the module's own read_disk(), which judges what is present with
model_download's check against the model's record (plugins/module_utils/model_manifest.py)."""

import json
import os
import pathlib

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table

Q, K = "qwen3.5-397b-nvfp4", "kimi-k2.5"


def host(capability, count=8):
    return {"gpu_count": count, "devices": [{"kind": "gpu", "compute_capability": capability}] * count,
            "memtotal_mb": 512 * 1024}


def run(profiles, name, facts, release="0.5.23", match="exact", **kw):
    table = release_table(release) if release else None
    return sp.validate(sp.Context(name, profiles, facts=facts, table=table, version=release, release_match=match, **kw))


def rule_errors(result, rule):
    return [p for p in result["errors"] if p["rule"] == rule]


# -- quantization vs compute capability (SGLang's get_min_capability per release) ------------------------
def test_nvfp4_on_hopper_with_0_5_10_refused(profiles):
    [p] = rule_errors(run(profiles, Q, host("9.0"), release="0.5.10.post1"), "quantization-capability")
    assert p["variable"].endswith(".quantization") and p["value"] == "modelopt_fp4"
    assert "10.0 or newer (SGLang 0.5.10.post1" in p["reason"] and "9.0" in p["reason"]


def test_nvfp4_on_hopper_accepted_where_sglang_accepts_it(profiles):
    """From 0.5.13 ModelOptFp4Config.get_min_capability() returns 80 (weight-only NVFP4 on Ampere+)."""
    assert rule_errors(run(profiles, Q, host("9.0"), release="0.5.23"), "quantization-capability") == []
    assert rule_errors(run(profiles, Q, host("7.5"), release="0.5.23"), "quantization-capability")


def test_fp8_on_ampere_turing(profiles):
    profiles[K]["quantization"] = "modelopt_fp8"  # ModelOptFp8Config: 89
    assert rule_errors(run(profiles, K, host("8.9")), "quantization-capability") == []
    [p] = rule_errors(run(profiles, K, host("8.6")), "quantization-capability")
    assert "8.9 or newer" in p["reason"]
    profiles[K]["quantization"] = "fp8"  # Fp8Config: 80 (Marlin fallback), not 8.9
    assert rule_errors(run(profiles, K, host("8.0")), "quantization-capability") == []


def test_quantization_from_config_json(profiles):
    del profiles[Q]["quantization"]
    cfg = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
           "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    [p] = rule_errors(run(profiles, Q, host("9.0"), release="0.5.10.post1", model_config=cfg), "quantization-capability")
    assert "config.json" in p["variable"]


def test_capability_from_the_inventory_before_the_driver(profiles):
    no_gpus = {"gpu_count": 0, "devices": [], "memtotal_mb": 512 * 1024}
    assert rule_errors(run(profiles, Q, no_gpus, release="0.5.10.post1"), "quantization-capability") == []
    result = run(profiles, Q, no_gpus, release="0.5.10.post1", expected_compute_capability="9.0")
    [p] = rule_errors(result, "quantization-capability")
    assert "llm_server_expected_compute_capability" in p["reason"]


def test_unknown_release_uses_the_lowest_minimum(profiles):
    """A branch ref: never refuse what some release accepts (modelopt_fp4: 80 from 0.5.13)."""
    assert rule_errors(run(profiles, Q, host("9.0"), match="branch"), "quantization-capability") == []


# -- hybrid GDN on Blackwell: attention, prefill and decode backends ----------------------------------------
@pytest.mark.parametrize("flag", ["--prefill-attention-backend", "--decode-attention-backend"])
def test_gdn_rule_covers_prefill_and_decode(profiles, flag):
    profiles[Q]["extra_args"] = [flag, "trtllm_mha"]  # SM120 has no tcgen05
    [p] = rule_errors(run(profiles, Q, host("12.0")), "gdn-attention")
    assert p["variable"].endswith(".extra_args[1]") and p["value"] == "trtllm_mha"


def test_gdn_prefill_backend_the_release_rejects(profiles):
    profiles[Q]["extra_args"] = ["--prefill-attention-backend", "fa4"]
    assert rule_errors(run(profiles, Q, host("12.0"), release="0.5.10.post1"), "gdn-attention") == []
    [p] = rule_errors(run(profiles, Q, host("12.0"), release="0.5.23"), "gdn-attention")  # 0.5.23 on SM120: no fa4
    assert "prefill" in p["reason"] and "'flashinfer', 'triton'" in p["reason"]


def test_gdn_per_release_and_sm100(profiles):
    profiles[Q]["attention_backend"] = "flashinfer"
    assert rule_errors(run(profiles, Q, host("12.0"), release="0.5.9"), "gdn-attention")
    assert rule_errors(run(profiles, Q, host("12.0"), release="0.5.23"), "gdn-attention") == []
    assert rule_errors(run(profiles, Q, host("10.0"), release="0.5.18"), "gdn-attention")  # SM100 set lacks flashinfer
    assert rule_errors(run(profiles, Q, host("12.0"), match="branch"), "gdn-attention")  # not known exactly: triton


# -- FP4 GEMM on SM120 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["cutlass", "flashinfer_cutlass", "flashinfer_trtllm"])
def test_fp4_gemm_backends_refused_on_sm120(profiles, backend):
    profiles[Q]["fp4_gemm_backend"] = backend
    [p] = rule_errors(run(profiles, Q, host("12.0"), release="0.5.10.post1"), "fp4-gemm-sm120")
    assert p["value"] == backend and "flashinfer_cudnn" in p["fix"]


def test_fp4_gemm_cutlass_fine_on_sm100(profiles):
    profiles[Q]["fp4_gemm_backend"] = "cutlass"
    profiles[Q]["attention_backend"] = "triton"
    assert rule_errors(run(profiles, Q, host("10.0"), release="0.5.10.post1"), "fp4-gemm-sm120") == []


# -- context length vs the model ------------------------------------------------------------------------
QWEN_CONFIG = {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
               "text_config": {"max_position_embeddings": 262144, "num_attention_heads": 32}}


def test_context_length_above_the_model(profiles):
    profiles[Q]["context_length"] = 300000
    [p] = rule_errors(run(profiles, Q, host("12.0"), model_config=QWEN_CONFIG), "context-length")
    assert p["variable"].endswith(".context_length") and "262144" in p["reason"] and "262144" in p["fix"]
    profiles[Q]["context_length"] = 262144
    assert rule_errors(run(profiles, Q, host("12.0"), model_config=QWEN_CONFIG), "context-length") == []


def test_context_length_allowed_by_sglangs_override_env_is_a_warning(profiles):
    profiles[Q]["context_length"] = 300000
    profiles[Q]["env"]["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] = "1"
    result = run(profiles, Q, host("12.0"), model_config=QWEN_CONFIG)
    assert rule_errors(result, "context-length") == [] and any(w["rule"] == "context-length" for w in result["warnings"])


def test_model_context_length_follows_sglang():
    """hf_transformers_utils.get_context_length: sub-config first, rope factor unless original_max_position_embeddings."""
    assert sp.model_context_length({"max_position_embeddings": 4096}) == 4096
    assert sp.model_context_length({"max_position_embeddings": 4096, "rope_scaling": {"factor": 4.0}}) == 16384
    assert sp.model_context_length({"max_position_embeddings": 4096, "rope_scaling": {
        "factor": 4.0, "original_max_position_embeddings": 1024}}) == 4096
    assert sp.model_context_length({"seq_length": 2048, "max_position_embeddings": 9}) == 2048
    assert sp.model_context_length(QWEN_CONFIG) == 262144
    assert sp.model_context_length({"architectures": ["X"]}) is None


# -- free disk for the model before anything changes ------------------------------------------------------
def _records(model_dir):
    """The record directory of these tests: outside the model directory, as model_download requires."""
    return str(model_dir.with_name(model_dir.name + "-records"))


def _manifest(model_dir, files, repo="nvidia/Qwen3.5-397B-A17B-NVFP4"):
    """A record as model_download's helper writes it (module_utils/model_manifest.py docstring), with the
    stat of the files present (hashes are not read by the per-run check)."""
    def stat(name):
        path = model_dir / name
        return model_manifest.fingerprint(path.stat()) if path.exists() else [0, 0, 0]
    os.makedirs(_records(model_dir), exist_ok=True)
    pathlib.Path(model_manifest.record_path(str(model_dir), _records(model_dir))).write_text(json.dumps({
        "format": model_manifest.FORMAT, "model_path": str(model_dir), "repo": repo, "revision": "main",
        "commit": "0" * 40, "source": "hub", "verified": "sha256", "verified_at": "2026-12-01T00:00:00Z",
        "files": {name: {"size": size, "sha256": "0" * 64, "stat": stat(name)} for name, size in files.items()}}))


def test_disk_space_for_the_download(profiles, tmp_path):
    stat = os.statvfs(tmp_path)
    free_gb = stat.f_bavail * stat.f_frsize / 1e9
    target = tmp_path / "models" / "qwen"  # does not exist yet: its nearest existing parent is measured
    profiles[Q].update(model_path=str(target), expected_size_gb=round(free_gb + 100))
    disk = sp.read_disk(str(target), 20, profiles[Q]["hub_repo"])
    assert disk["where"] == str(tmp_path) and disk["have_bytes"] == 0 and disk["state"] == "no_manifest"
    [p] = rule_errors(run(profiles, Q, host("12.0"), disk=disk), "disk-space")
    assert p["variable"].endswith(".model_path") and "GB free" in p["reason"] and "model_download_space_margin_gb" in p["fix"]
    profiles[Q]["expected_size_gb"] = 0.001
    assert rule_errors(run(profiles, Q, host("12.0"), disk=sp.read_disk(str(target), 0, profiles[Q]["hub_repo"])),
                       "disk-space") == []


def test_present_bytes_count_as_model_download_counts_them(profiles, tmp_path):
    """Half of the model there (per its manifest): only the other half plus the margin must be free.

    The sizes are set from the free space read_disk measured, not from a statvfs of the test's own: the
    filesystem is shared with the rest of the run, and its free space moved by more than the test's 8 KiB margin
    between two readings (failed in the cold run of 648c222 on a bare 2-core VM).
    """
    (tmp_path / "a.safetensors").write_bytes(b"x" * 4096)
    _manifest(tmp_path, {"a.safetensors": 4096, "b.safetensors": 4096})
    profiles[Q].update(model_path=str(tmp_path))
    disk = sp.read_disk(str(tmp_path), 0, profiles[Q]["hub_repo"], record_dir=_records(tmp_path))
    assert disk["state"] == "incomplete" and disk["have_bytes"] == 4096
    free = disk["free_bytes"]
    profiles[Q]["expected_size_gb"] = (free + 4096 * 1.5) / 1e9
    assert rule_errors(run(profiles, Q, host("12.0"), disk=disk), "disk-space")  # needs free + 2048 bytes
    profiles[Q]["expected_size_gb"] = (free - 8192) / 1e9
    assert rule_errors(run(profiles, Q, host("12.0"), disk=disk), "disk-space") == []


def test_disk_space_skipped_for_a_complete_download(profiles, tmp_path):
    for i in range(2):
        (tmp_path / ("model-%d.safetensors" % i)).write_bytes(b"x" * 1000)
    (tmp_path / "config.json").write_text(json.dumps(QWEN_CONFIG))
    _manifest(tmp_path, {"model-0.safetensors": 1000, "model-1.safetensors": 1000, "config.json": len(
        json.dumps(QWEN_CONFIG))})
    profiles[Q].update(model_path=str(tmp_path), expected_size_gb=10 ** 9)
    disk = sp.read_disk(str(tmp_path), 10 ** 6, profiles[Q]["hub_repo"], record_dir=_records(tmp_path))  # no disk has that margin
    assert disk["state"] == "complete"
    assert rule_errors(run(profiles, Q, host("12.0"), disk=disk), "disk-space") == []
    (tmp_path / "model-1.safetensors").write_bytes(b"x" * 10)  # truncated: model_download would fetch it again
    disk = sp.read_disk(str(tmp_path), 10 ** 6, profiles[Q]["hub_repo"], record_dir=_records(tmp_path))
    assert disk["state"] == "incomplete" and rule_errors(run(profiles, Q, host("12.0"), disk=disk), "disk-space")


def test_disk_rule_needs_a_hub_repo(profiles, tmp_path):
    profiles[K].update(model_path=str(tmp_path / "k"), expected_size_gb=10 ** 9)  # no hub_repo: nothing downloads
    assert rule_errors(run(profiles, K, host("12.0"), disk=sp.read_disk(str(tmp_path / "k"), 20)), "disk-space") == []
