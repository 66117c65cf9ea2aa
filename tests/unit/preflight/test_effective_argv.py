"""Rules judge the command line SGLang really gets: profile keys plus extra_args, parsed like argparse.

Flag definitions come from the release table generated from real PyPI releases
(plugins/module_utils/sglang_release_table.py; tests/integration/service/test_release_table_vs_pypi.py
compares it with the releases themselves). Facts injected: 8 x SM120, 512 GiB.
"""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_flags as sf
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table

Q, K = "qwen3.5-397b-nvfp4", "kimi-k2.5"


def run(profiles, name, facts, release="0.5.23", **kw):
    table = release_table(release) if release else None
    return sp.validate(sp.Context(name, profiles, facts=facts, table=table, version=release, **kw))


def errors(result, rule=None):
    return [p for p in result["errors"] if rule is None or p["rule"] == rule]


@pytest.mark.parametrize("release", ["0.5.10.post1", "0.5.23"])
@pytest.mark.parametrize("name", [K, Q])
def test_reference_profiles_pass_against_the_table(profiles, sm120_host, name, release):
    result = run(profiles, name, sm120_host, release=release)
    assert result["errors"] == [], [sp.format_problem(p) for p in result["errors"]]


# -- extra_args overriding checked keys (the examples) ------------------------------------
def test_extra_args_attention_backend_for_qwen35_on_sm120(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--attention-backend", "flashinfer"]
    result = run(profiles, Q, sm120_host, release="0.5.9")  # 0.5.9: hybrid GDN on Blackwell = triton, trtllm_mha
    [dup] = errors(result, "duplicate-flag")
    assert dup["variable"] == "llm_server_models['%s'].extra_args[0]" % Q
    assert "attention_backend (--attention-backend triton)" in dup["reason"] and "keeps the last" in dup["reason"]
    assert "remove it from extra_args" in dup["fix"]
    [gdn] = errors(result, "gdn-attention")  # judged on the value argparse keeps: flashinfer
    assert gdn["value"] == "flashinfer" and gdn["variable"].endswith(".extra_args[1]")


def test_extra_args_attention_backend_without_the_profile_key_is_still_judged(profiles, sm120_host):
    del profiles[Q]["attention_backend"]
    profiles[Q]["extra_args"] = ["--attention-backend=flashinfer"]
    result = run(profiles, Q, sm120_host, release="0.5.9")
    assert errors(result, "duplicate-flag") == []
    [gdn] = errors(result, "gdn-attention")
    assert gdn["value"] == "flashinfer" and gdn["variable"].endswith(".extra_args[0]")


def test_extra_args_fp4_gemm_flashinfer_cutlass(profiles, sm120_host):
    del profiles[Q]["fp4_gemm_backend"]
    profiles[Q]["extra_args"] = ["--fp4-gemm-backend", "flashinfer_cutlass"]
    [p] = errors(run(profiles, Q, sm120_host), "fp4-gemm-sm120")
    assert p["value"] == "flashinfer_cutlass" and p["variable"].endswith(".extra_args[1]") and "NaN" in p["reason"]


def test_extra_args_topk_4_with_spec_v2(profiles, sm120_host):
    profiles[K]["speculative"].pop("eagle_topk")
    profiles[K]["extra_args"] = ["--speculative-eagle-topk", "4"]
    [p] = errors(run(profiles, K, sm120_host), "speculative")
    assert p["value"] == "4" and "topk = 1" in p["reason"] and "extra_args" in p["fix"]


def test_extra_args_host_without_key(profiles, sm120_host):
    del profiles[K]["host"]
    profiles[K]["extra_args"] = ["--host", "0.0.0.0"]
    [p] = errors(run(profiles, K, sm120_host), "listen-auth")
    assert p["value"] == "0.0.0.0" and p["variable"].endswith(".extra_args[1]")
    assert errors(run(profiles, K, sm120_host, api_key_set=True), "listen-auth") == []


def test_extra_args_disable_radix_cache_with_hicache(profiles, sm120_host):
    profiles[K]["extra_args"] = ["--disable-radix-cache"]
    [p] = errors(run(profiles, K, sm120_host), "hicache")
    assert p["variable"].endswith(".extra_args[0]")


def test_extra_args_mem_fraction_out_of_range(profiles, sm120_host):
    del profiles[Q]["mem_fraction_static"]
    profiles[Q]["extra_args"] = ["--mem-fraction-static", "1.5"]
    [p] = errors(run(profiles, Q, sm120_host), "ranges")
    assert p["variable"].endswith(".extra_args[1]") and p["value"] == "1.5"


def test_extra_args_tp_size_alias_counts_for_the_gpu_check(profiles, sm120_host):
    del profiles[Q]["tp_size"]
    profiles[Q]["extra_args"] = ["--tensor-parallel-size", "16"]
    result = run(profiles, Q, sm120_host)
    [p] = errors(result, "tp-vs-gpus")
    assert p["value"] == 16 and p["variable"].endswith(".extra_args[1]")


# -- a flag given twice ----------------------------------------------------------------------------
def test_alias_given_twice_is_one_flag_given_twice(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--tensor-parallel-size", "8"]  # same dest as the profile's --tp-size
    [p] = errors(run(profiles, Q, sm120_host), "duplicate-flag")
    assert "--tp-size 8" in p["reason"] and "--tensor-parallel-size 8" in p["reason"]


def test_switch_given_twice_in_extra_args(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--enable-metrics", "--enable-metrics"]
    [p] = errors(run(profiles, Q, sm120_host), "duplicate-flag")
    assert p["fix"] == "keep one of them"


def test_deprecated_spelling_and_new_flag_share_a_dest(profiles, sm120_host):
    """0.5.23 maps --enable-flashinfer-allreduce-fusion onto --flashinfer-allreduce-fusion-backend: one setting."""
    profiles[K]["extra_args"] = ["--enable-flashinfer-allreduce-fusion"]
    result = run(profiles, K, sm120_host)
    table = release_table("0.5.23")
    if table.get("--enable-flashinfer-allreduce-fusion").dest == table.get("--flashinfer-allreduce-fusion-backend").dest:
        assert errors(result, "duplicate-flag")
    assert any(w["rule"] == "deprecated" and w["value"] == "--enable-flashinfer-allreduce-fusion"
               for w in result["warnings"])


def test_repeatable_flags_are_not_duplicates(profiles, sm120_host):
    """No tabulated release has an append-style flag (action="append"); a table with one (a test double
    built here, not SGLang data) shows that giving it twice is allowed, as argparse accumulates it."""
    table = release_table("0.5.23")
    double = sf.FlagTable("(test double)", table.layout, "0.5.23")
    for flag in table.definitions():
        double.add(flag)
    double.add(sf.FlagDef(["--lora-paths-test"], "lora_paths_test", repeatable=True))
    profiles[Q]["extra_args"] = ["--lora-paths-test", "a", "--lora-paths-test", "b"]
    result = sp.validate(sp.Context(Q, profiles, facts=sm120_host, table=double, version="0.5.23"))
    assert result["errors"] == []
    assert not any(f.repeatable for f in table.definitions())  # the real table: every flag is "store" or a switch


def test_repeated_flags_are_refused_whatever_the_release(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--chunked-prefill-size", "4096", "--chunked-prefill-size", "8192"]
    for release in ("0.5.4", "0.5.10.post1", "0.5.23"):
        assert errors(run(profiles, Q, sm120_host, release=release), "duplicate-flag"), release


# -- flags, values and switches checked against the release before it is built ----------------------
def test_misspelled_flag_names_the_extra_args_item_and_the_right_spelling(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--chunked-prefil-size", "8192"]
    [p] = errors(run(profiles, Q, sm120_host))
    assert p["rule"] == "flag-drift" and p["variable"] == "llm_server_models['%s'].extra_args[0]" % Q
    assert "did you mean --chunked-prefill-size" in p["fix"]


def test_flag_of_a_newer_release_names_the_releases_that_have_it(profiles, sm120_host):
    [p] = errors(run(profiles, Q, sm120_host, release="0.5.4"))  # --fp4-gemm-backend came in 0.5.8
    assert p["rule"] == "flag-drift" and p["variable"].endswith(".fp4_gemm_backend")
    assert "SGLang 0.5.8-" in p["fix"]


def test_unknown_parser_with_the_release_list(profiles, sm120_host):
    profiles[Q]["tool_call_parser"] = "qwen3_coderr"
    [p] = errors(run(profiles, Q, sm120_host))
    assert p["rule"] == "parsers" and "did you mean 'qwen3_coder'" in p["fix"] and "SGLang 0.5.23" in p["reason"]


def test_switch_given_a_value_says_how_to_write_it(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--enable-metrics=true"]
    [p] = errors(run(profiles, Q, sm120_host))
    assert "write --enable-metrics alone" in p["fix"] and "fix the value" not in p["fix"]
    profiles[Q]["extra_args"] = ["--enable-metrics", "true"]
    [p] = errors(run(profiles, Q, sm120_host))
    assert p["variable"].endswith(".extra_args[1]") and "follows the switch --enable-metrics" in p["reason"]
    assert "remove 'true'" in p["fix"]


def test_bad_choice_suggests_the_close_one(profiles, sm120_host):
    profiles[Q]["moe_runner_backend"] = "flashinfer_cutlas"
    [p] = errors(run(profiles, Q, sm120_host))
    assert p["variable"].endswith(".moe_runner_backend") and "did you mean 'flashinfer_cutlass'" in p["fix"]


def test_value_missing_at_the_end(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--chunked-prefill-size"]
    [p] = errors(run(profiles, Q, sm120_host))
    assert "expects a value" in p["reason"] and "['--chunked-prefill-size', 'VALUE']" in p["fix"]


def test_non_integer_for_an_integer_flag_says_an_integer(profiles, sm120_host):
    profiles[Q]["extra_args"] = ["--chunked-prefill-size", "lots"]
    [p] = errors(run(profiles, Q, sm120_host))
    assert "expects an integer" in p["reason"] and "a integer" not in p["reason"] + p["fix"]
