"""Issue 37: successor hints derived from the release table, numeric bounds, and one refusal for both passes.

Facts and where they come from:
- The release table (plugins/module_utils/sglang_release_table.py) is generated from the real PyPI
  releases 0.5.4-0.5.23 by scripts/generate-sglang-release-table.py; its SUCCESSORS rows are what each
  release's own deprecated definitions name (the action's new_flag= or a help text's deprecation note),
  re-read from the wheels by tests/integration/service/test_release_table_vs_pypi.py.
- Read by hand in the releases (shared docs/sglang-facts.md and the 0.5.23 wheel): `--enable-hicache` is an
  alias of `--enable-hierarchical-cache` in 0.5.23 only; `--enable-flashinfer-allreduce-fusion` is a switch up
  to 0.5.13 and from 0.5.14 deprecated, its help in 0.5.23 (sglang/srt/server_args.py:441) reading
  "(Deprecated: use --flashinfer-allreduce-fusion-backend=auto)"; `--cuda-graph-max-bs` is a deprecated alias
  of `--cuda-graph-max-bs-decode` (dest cuda_graph_max_bs_decode) in 0.5.14-0.5.19 and gone from 0.5.20.
- The reference models' config.json shapes (only the keys SGLang's get_context_length reads): Kimi K2.5
  (moonshotai/Kimi-K2.5, KimiK25ForConditionalGeneration) nests a DeepSeek-V3 text_config with
  max_position_embeddings 262144 and YaRN rope scaling, factor 64 from a 4096 base
  (https://glennklockwood.com/garden/kimi-k2.5: "Context length 256k tokens", "YaRN (x64, from 4k base)");
  Qwen3.5-397B-A17B (Qwen/Qwen3.5-397B-A17B, Qwen3_5MoeForConditionalGeneration) nests text_config with
  max_position_embeddings 262144 (xorbitsai/inference doc/source/models/builtin/llm/qwen3.5.rst and
  kimi-k2.5.rst: "Context Length: 262144"). The full files could not be fetched here (no network to the
  Hub); only these keys are used.
- The SM120 host: the sm120_host fixture (tests/conftest.py), gpu_info's shape for 8 x RTX PRO 6000.
"""

import json

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import ARGUMENT_SPEC, run
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import (
    RELEASES, release_table, renames, successor_of)

K, Q = "kimi-k2.5", "qwen3.5-397b-nvfp4"
KIMI_K25_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
    "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
                    "max_position_embeddings": 262144,
                    "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                                     "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}},
}
QWEN35_CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {"model_type": "qwen3_5_moe_text", "max_position_embeddings": 262144},
}


def drift(profiles, name, release, extra_args):
    profiles[name]["extra_args"] = extra_args
    table = release_table(release)
    result = sp.validate(sp.Context(name, profiles, table=table, version=release, release_match="exact"))
    return [p for p in result["errors"] if p["rule"] == "flag-drift"]


def _value_for(flag, release):
    """A value the flag takes in the releases that define it (a choice, a number or a word)."""
    for other in RELEASES:
        definition = release_table(other).get(flag)
        if definition is not None:
            if not definition.takes_value:
                return []
            if definition.choices:
                return [definition.choices[0]]
            return ["1"]
    return []


# -- 1. successors -------------------------------------------------------------------------------------
def test_every_rename_between_the_tables_releases_names_its_successor(profiles):
    """Each (flag, successor) pair the table yields, on the newest release lacking the flag and on the
    oldest: the refusal's fix names the successor as 'use `--X` (...)'."""
    found = renames()
    pairs = {}
    for flag, release, successor in found:
        pairs.setdefault((flag, successor["successor"]), []).append((release, successor))
    assert len(pairs) >= 40
    for (flag, name), where in sorted(pairs.items()):
        for release, successor in (where[0], where[-1]):
            shown = name + ("=" + successor["value"] if successor["value"] else "")
            problems = drift(profiles, K, release, [flag] + _value_for(flag, release))
            [p] = [p for p in problems if p["value"] == flag]
            assert p["fix"].startswith("use `%s` (" % shown), (flag, release, p["fix"])
            assert successor["text"] in p["fix"] and flag in successor["text"]
            assert release_table(release).get(name) is not None


@pytest.mark.parametrize("flag,release,successor,words", [
    # renamed: the deprecated alias shares the new flag's dest (0.5.14-0.5.19), gone from 0.5.20
    ("--cuda-graph-max-bs", "0.5.23", "--cuda-graph-max-bs-decode",
     "SGLang \u2265 0.5.14 renamed `--cuda-graph-max-bs`; 0.5.20 dropped the old name"),
    # the newer name on an older release: the deprecation note of 0.5.14 names it
    ("--cuda-graph-max-bs-decode", "0.5.13", "--cuda-graph-max-bs",
     "`--cuda-graph-max-bs-decode` is the name SGLang \u2265 0.5.14 gave it"),
    # an alias only 0.5.23 accepts
    ("--enable-hicache", "0.5.22", "--enable-hierarchical-cache",
     "`--enable-hicache` is the name SGLang \u2265 0.5.23 gave it; 0.5.22 knows only `--enable-hierarchical-cache`"),
    # the backend flag on a release that has only the switch
    ("--flashinfer-allreduce-fusion-backend", "0.5.10.post1", "--enable-flashinfer-allreduce-fusion",
     "SGLang \u2265 0.5.14 gave it"),
])
def test_real_renames_by_hand(profiles, flag, release, successor, words):
    [p] = [p for p in drift(profiles, K, release, [flag] + _value_for(flag, release)) if p["value"] == flag]
    assert p["fix"].startswith("use `%s` (" % successor), p["fix"]
    assert words in p["fix"] and "extra_args[0]" in p["fix"]


def test_deprecated_switch_names_its_successor_from_the_help_text(profiles):
    """0.5.23 still accepts the switch (deprecated): a warning naming the flag its help text names."""
    assert release_table("0.5.23").get("--enable-flashinfer-allreduce-fusion").successor == \
        "--flashinfer-allreduce-fusion-backend=auto"
    assert release_table("0.5.13").get("--enable-flashinfer-allreduce-fusion").successor is None
    profiles[K]["allreduce"]["flashinfer_fusion"] = False
    profiles[K]["extra_args"] = ["--enable-flashinfer-allreduce-fusion"]
    result = sp.validate(sp.Context(K, profiles, table=release_table("0.5.23"), version="0.5.23"))
    [p] = [p for p in result["warnings"] if p["rule"] == "deprecated" and p["value"] == "--enable-flashinfer-allreduce-fusion"]
    assert "`--flashinfer-allreduce-fusion-backend=auto`" in p["reason"] and "allreduce.flashinfer_fusion" in p["fix"]


def test_no_successor_keeps_the_old_hints(profiles):
    """A flag with no successor in the release: 'build a release that has it' / did-you-mean, as before."""
    assert successor_of("--fp4-gemm-backend", release_table("0.5.4")) is None
    [p] = [p for p in drift(profiles, K, "0.5.4", ["--fp4-gemm-backend", "flashinfer_cudnn"])
           if p["value"] == "--fp4-gemm-backend"]
    assert p["fix"].startswith("remove ") and "SGLang 0.5.8-0.5.23" in p["fix"]


# -- 2. bounds -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,config", [(K, KIMI_K25_CONFIG), (Q, QWEN35_CONFIG)])
def test_context_length_bound_from_the_reference_models_config(profiles, sm120_host, name, config):
    """Kimi's YaRN factor does not multiply (original_max_position_embeddings is set): 262144, not 16M."""
    assert sp.model_context_source(config) == (262144, "text_config.max_position_embeddings")
    profiles[name]["context_length"] = 262144
    ok = sp.validate(sp.Context(name, profiles, facts=sm120_host, table=release_table("0.5.23"), version="0.5.23",
                                model_config=config))
    assert not [p for p in ok["errors"] if p["rule"] == "context-length"]
    profiles[name]["context_length"] = 1000000
    bad = sp.validate(sp.Context(name, profiles, facts=sm120_host, table=release_table("0.5.23"), version="0.5.23",
                                 model_config=config))
    [p] = [p for p in bad["errors"] if p["rule"] == "context-length"]
    assert "maximum context length 262144 (text_config.max_position_embeddings in %s/config.json)" % (
        profiles[name]["model_path"]) in p["reason"]
    assert "262144 or less" in p["fix"] and str(p["value"]) == "1000000"


@pytest.mark.parametrize("key,flag", [("context_length", "--context-length"),
                                      ("max_running_requests", "--max-running-requests")])
def test_integer_overflow_refused_with_the_bound(profiles, key, flag):
    profiles[K][key] = 2 ** 63
    result = sp.validate(sp.Context(K, profiles, table=release_table("0.5.23"), version="0.5.23"))
    [p] = [p for p in result["errors"] if p["rule"] == "ranges" and p["variable"].endswith(key)]
    assert "at most 9223372036854775807" in p["fix"] and flag in p["reason"]
    profiles[K][key] = 2 ** 63 - 1  # the bound itself overflows nothing
    result = sp.validate(sp.Context(K, profiles, table=release_table("0.5.23"), version="0.5.23"))
    assert not [p for p in result["errors"] if p["rule"] == "ranges" and p["variable"].endswith(key)]


# -- 3. one refusal for both passes ----------------------------------------------------------------------
def _params(**kw):
    p = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()}
    for key, value in p.items():
        if isinstance(value, (list, dict)):
            p[key] = type(value)(value)
    p.update(kw)
    return p


def test_four_mistakes_one_refusal_with_four_rules(profiles, sm120_host, tmp_path):
    """The controller pass knows no compute capability (llm_server_expected_compute_capability unset):
    it finds tp 16 > 8 expected GPUs and 0.0.0.0 without a key, and defers them; the host pass sees the
    SM120 GPUs and adds the FlashInfer attention and the CUTLASS FP4 GEMM; the refusal lists all four."""
    profile = profiles[Q]
    profile.update(attention_backend="flashinfer", fp4_gemm_backend="flashinfer_cutlass", tp_size=16,
                   host="0.0.0.0", model_path=str(tmp_path / "qwen"))
    profile.pop("hub_repo", None)
    (tmp_path / "qwen").mkdir()
    (tmp_path / "qwen" / "config.json").write_text(json.dumps(QWEN35_CONFIG))
    common = dict(profile_name=Q, profiles=profiles, sglang_ref="v0.5.9", expected_gpu_count=8)
    out, _warnings, failure = run(_params(host_checks=False, defer_errors=True, inventory_hostname="gpu1",
                                          host_address="10.0.0.5", **common))
    assert failure is None and {p["rule"] for p in out["deferred"]} == {"tp-vs-gpus", "listen-auth"}
    assert "argv" not in out and len(out["deferred_report"]) == 2
    out, _warnings, failure = run(_params(host_checks=True, gpu_info=sm120_host, memtotal_mb=512 * 1024,
                                          deferred=out["deferred"], disk_check=False, **common))
    rules = [line.split("]")[0][1:] for line in failure.splitlines() if line.startswith("[")]
    assert rules == ["tp-vs-gpus", "gdn-attention", "fp4-gemm-sm120", "listen-auth"], failure
    assert "4 problem(s), nothing was changed" in failure
    assert "GPUs reported by gpu_info" in failure  # the host's wording of tp-vs-gpus, not the controller's


def test_blocking_problems_are_not_deferred(profiles):
    """A placeholder address (nothing to connect to) fails the controller pass at once, with the rest."""
    profiles[K]["host"] = "0.0.0.0"
    _out, _warnings, failure = run(_params(host_checks=False, defer_errors=True, profile_name=K, profiles=profiles,
                                           inventory_hostname="gpu1", host_address="REPLACE_WITH_SERVER_ADDRESS",
                                           placeholder_markers=["REPLACE_WITH"], sglang_ref="v0.5.23"))
    assert failure and "[inventory]" in failure and "[listen-auth]" in failure
