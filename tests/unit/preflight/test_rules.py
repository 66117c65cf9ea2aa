"""Every preflight rule with a passing and a failing profile (facts injected: 8 x SM120, 512 GiB RAM).

No SGLang tree here (rules that need one get it in tests/integration/service with real releases)."""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp


def run(profiles, name, facts, **kw):
    return sp.validate(sp.Context(name, profiles, facts=facts, **kw))


def rules_of(result, severity="errors"):
    return [p["rule"] for p in result[severity]]


@pytest.mark.parametrize("name", ["kimi-k2.5", "qwen3.5-397b-nvfp4"])
def test_reference_profiles_pass_on_the_production_host(profiles, sm120_host, name):
    result = run(profiles, name, sm120_host)
    assert result["errors"] == []
    assert result["argv"][:2] == ["--model-path", profiles[name]["model_path"]]


def test_all_problems_reported_at_once_with_variable_value_reason_fix(profiles, sm120_host):
    q = profiles["qwen3.5-397b-nvfp4"]
    q.update(attention_backend="flashinfer", fp4_gemm_backend="flashinfer_cutlass", tp_size=16)
    result = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)
    assert set(rules_of(result)) == {"gdn-attention", "fp4-gemm-sm120", "tp-vs-gpus"}
    for p in result["errors"]:
        assert p["variable"].startswith("llm_server_models['qwen3.5-397b-nvfp4'].")
        assert p["reason"] and p["fix"] and p["source"]
    text = sp.format_problem(result["errors"][0])
    assert "Fix:" in text and "source:" in text


# -- seed mistakes reintroduced (acceptance) -------------------------------------------------------
def test_seed_flashinfer_attention_for_qwen35_refused(profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["attention_backend"] = "flashinfer"
    [p] = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)["errors"]
    assert p["rule"] == "gdn-attention" and p["value"] == "flashinfer"
    assert "hybrid GDN" in p["reason"] and "attention_backend: triton" in p["fix"]


def test_seed_flashinfer_cutlass_fp4_gemm_refused(profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["fp4_gemm_backend"] = "flashinfer_cutlass"
    [p] = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)["errors"]
    assert p["rule"] == "fp4-gemm-sm120" and "NaN" in p["reason"] and "flashinfer_cudnn" in p["fix"]


def test_seed_spec_v2_with_topk_4_refused(profiles, sm120_host):
    profiles["kimi-k2.5"]["speculative"]["eagle_topk"] = 4
    [p] = run(profiles, "kimi-k2.5", sm120_host)["errors"]
    assert p["rule"] == "speculative" and "topk = 1" in p["reason"]


# -- one test per rule: pass and fail --------------------------------------------------------------
def test_profile_exists(profiles, sm120_host):
    assert rules_of(run(profiles, "nope", sm120_host)) == ["profile-exists"]
    assert rules_of(run({}, "x", sm120_host)) == ["profile-exists"]
    profiles["bad name"] = profiles["kimi-k2.5"]
    assert rules_of(run(profiles, "bad name", sm120_host)) == ["profile-exists"]


def test_schema(profiles, sm120_host):
    k = profiles["kimi-k2.5"]
    k["tp_szie"] = 8
    k["port"] = "30000"
    k["hicache"]["enabeld"] = True
    del k["served_model_name"]
    result = run(profiles, "kimi-k2.5", sm120_host)
    bad = {p["variable"].split("]", 1)[1] for p in result["errors"] if p["rule"] == "schema"}
    assert bad == {".tp_szie", ".port", ".hicache.enabeld", ".served_model_name"}


def test_schema_rejects_bool_for_int(profiles, sm120_host):
    profiles["kimi-k2.5"]["tp_size"] = True
    assert "schema" in rules_of(run(profiles, "kimi-k2.5", sm120_host))


@pytest.mark.parametrize("key,value,rule", [
    ("tp_size", 0, "ranges"), ("mem_fraction_static", 1.2, "ranges"), ("port", 70000, "ranges"),
    ("model_path", "relative/dir", "paths"), ("context_length", 0, "ranges"), ("env", {"BAD-NAME": "1"}, "ranges"),
    ("extra_args", ["--a\n--b"], "control-characters"), ("extra_args", ["--chunked-prefill-size 8192"], "ranges"),
])
def test_ranges(profiles, sm120_host, key, value, rule):
    profiles["qwen3.5-397b-nvfp4"][key] = value
    assert rule in rules_of(run(profiles, "qwen3.5-397b-nvfp4", sm120_host))


def test_ranges_hicache_ratio_must_exceed_one(profiles, sm120_host):
    profiles["kimi-k2.5"]["hicache"]["ratio"] = 0.5
    assert "ranges" in rules_of(run(profiles, "kimi-k2.5", sm120_host))


def test_tp_vs_gpus(profiles, sm120_host):
    profiles["kimi-k2.5"]["tp_size"] = 8
    assert "tp-vs-gpus" not in rules_of(run(profiles, "kimi-k2.5", sm120_host))
    four = dict(sm120_host, gpu_count=4)
    [p] = [p for p in run(profiles, "kimi-k2.5", four)["errors"] if p["rule"] == "tp-vs-gpus"]
    assert "at most 4" in p["fix"]


def test_tp_vs_expected_gpu_count_before_the_driver(profiles):
    no_gpus = {"gpu_count": 0, "devices": [], "memtotal_mb": 512 * 1024}
    assert "tp-vs-gpus" in rules_of(run(profiles, "kimi-k2.5", no_gpus, expected_gpu_count=4))
    assert "tp-vs-gpus" not in rules_of(run(profiles, "kimi-k2.5", no_gpus, expected_gpu_count=8))


def test_parsers_without_sglang_catch_the_qwen3_tool_parser_mistake(profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["tool_call_parser"] = "qwen3"
    [p] = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)["errors"]
    assert p["rule"] == "parsers" and "qwen3_coder" in p["fix"]


def test_flag_drift_without_sglang_catches_known_renames(profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["extra_args"] = ["--fp4-gemm-runner-backend", "flashinfer_cudnn"]
    [p] = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)["errors"]
    assert p["rule"] == "flag-drift" and "--fp4-gemm-backend" in p["fix"]


def test_gdn_attention_from_config_json(profiles, sm120_host):
    q = profiles["qwen3.5-397b-nvfp4"]
    del q["architectures"]
    q["attention_backend"] = "flashinfer"
    assert run(profiles, "qwen3.5-397b-nvfp4", sm120_host)["errors"] == []  # architecture unknown: no rule
    cfg = {"architectures": ["Qwen3_5MoeForConditionalGeneration"]}
    assert rules_of(run(profiles, "qwen3.5-397b-nvfp4", sm120_host, model_config=cfg)) == ["gdn-attention"]


def test_gdn_attention_follows_the_release(profiles, sm120_host):
    """0.5.10.post1's attention_registry accepts flashinfer for hybrid GDN on Blackwell; trtllm_mha never on SM120."""
    profiles["qwen3.5-397b-nvfp4"]["attention_backend"] = "flashinfer"
    assert run(profiles, "qwen3.5-397b-nvfp4", sm120_host, version="0.5.10.post1")["errors"] == []
    assert "gdn-attention" in rules_of(run(profiles, "qwen3.5-397b-nvfp4", sm120_host, version="0.5.9"))
    profiles["qwen3.5-397b-nvfp4"]["attention_backend"] = "trtllm_mha"
    assert "gdn-attention" in rules_of(run(profiles, "qwen3.5-397b-nvfp4", sm120_host, version="0.5.23"))


def test_gdn_rule_only_on_blackwell(profiles):
    hopper = {"gpu_count": 8, "devices": [{"kind": "gpu", "compute_capability": "9.0"}] * 8, "memtotal_mb": 10 ** 6}
    profiles["qwen3.5-397b-nvfp4"]["attention_backend"] = "flashinfer"
    assert "gdn-attention" not in rules_of(run(profiles, "qwen3.5-397b-nvfp4", hopper))


def test_fp4_gemm_auto_is_a_warning(profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["fp4_gemm_backend"] = "auto"
    result = run(profiles, "qwen3.5-397b-nvfp4", sm120_host)
    assert result["errors"] == [] and rules_of(result, "warnings") == ["fp4-gemm-sm120"]


def test_eagle_without_draft_model(profiles, sm120_host):
    del profiles["kimi-k2.5"]["speculative"]["draft_model_path"]
    [p] = run(profiles, "kimi-k2.5", sm120_host)["errors"]
    assert p["rule"] == "speculative" and p["variable"].endswith("speculative.draft_model_path")


def test_spec_v2_default_on_in_0_5_11_to_0_5_13(profiles, sm120_host):
    spec = profiles["kimi-k2.5"]["speculative"]
    spec.update(spec_v2=False, eagle_topk=4)
    assert run(profiles, "kimi-k2.5", sm120_host, version="0.5.10.post1")["errors"] == []
    assert "speculative" in rules_of(run(profiles, "kimi-k2.5", sm120_host, version="0.5.12"))


def test_hicache_host_pool_must_fit_ram(profiles, sm120_host):
    assert "hicache" not in rules_of(run(profiles, "kimi-k2.5", sm120_host))  # 8 x 45 + 10 = 370 <= 512
    profiles["kimi-k2.5"]["hicache"]["ratio"] = 6.0  # 8 x 67.5 + 10 = 550 > 512
    [p] = run(profiles, "kimi-k2.5", sm120_host)["errors"]
    assert p["rule"] == "hicache" and "exceeds the host's 512 GB RAM" in p["reason"]


def test_hicache_size_gb_overrides_ratio(profiles, sm120_host):
    profiles["kimi-k2.5"]["hicache"]["size_gb"] = 70
    assert "hicache" in rules_of(run(profiles, "kimi-k2.5", sm120_host))


def test_hicache_with_radix_cache_disabled(profiles, sm120_host):
    profiles["kimi-k2.5"]["disable_radix_cache"] = True
    assert "hicache" in rules_of(run(profiles, "kimi-k2.5", sm120_host))
    profiles["kimi-k2.5"]["disable_radix_cache"] = False
    profiles["kimi-k2.5"]["extra_args"] = ["--disable-radix-cache"]
    assert "hicache" in rules_of(run(profiles, "kimi-k2.5", sm120_host))


def test_hicache_unsizable_is_a_warning(profiles, sm120_host):
    del profiles["kimi-k2.5"]["hicache"]["kv_pool_gb_per_rank"]
    result = run(profiles, "kimi-k2.5", sm120_host)
    assert result["errors"] == [] and "hicache" in rules_of(result, "warnings")


@pytest.mark.parametrize("host,key,allow,ok", [
    ("127.0.0.1", False, False, True), ("::1", False, False, True), ("localhost", False, False, True),
    ("0.0.0.0", False, False, False), ("10.1.2.3", False, False, False),
    ("0.0.0.0", True, False, True), ("0.0.0.0", False, True, True),
])
def test_listen_auth(profiles, sm120_host, host, key, allow, ok):
    profiles["kimi-k2.5"].update(host=host, allow_unauthenticated=allow)
    result = run(profiles, "kimi-k2.5", sm120_host, api_key_set=key)
    assert ("listen-auth" not in rules_of(result)) is ok


def test_flag_source_unreadable_dir_is_named(profiles, sm120_host, tmp_path):
    table, version, error = sp.load_table(str(tmp_path))
    assert table is None and error[0] == str(tmp_path)
    result = run(profiles, "kimi-k2.5", sm120_host, flags_error=error)
    [p] = result["errors"]
    assert p["rule"] == "flag-source" and "server_args.py" in p["reason"]


def test_rules_table_is_complete():
    ids = [r["id"] for r in sp.RULES]
    assert len(ids) == len(set(ids))
    for rule in sp.RULES:
        assert rule["source"] and rule["checks"] and callable(rule["fn"])


def test_tp_vs_gpus_multi_node(profiles, sm120_host):
    profiles["kimi-k2.5"].update(tp_size=16, nnodes=2)
    assert "tp-vs-gpus" not in rules_of(run(profiles, "kimi-k2.5", sm120_host))
    profiles["kimi-k2.5"]["tp_size"] = 32
    assert "tp-vs-gpus" in rules_of(run(profiles, "kimi-k2.5", sm120_host))
