"""Both reference profiles' rendered argv against the REAL flag definitions of SGLang 0.5.10.post1
(sdist, server_args.py layout) and 0.5.23 (wheel, arg_groups layout), downloaded from PyPI at test
time (tests/support/pypi.py, cached). The definitions are read from source by
plugins/module_utils/sglang_flags.py (no torch, no SGLang import): these tests also pin that reader
to facts checked by hand in those releases (docs: shared sglang-facts.md)."""

import re

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_flags as sf
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import render
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table
from support import pypi

RELEASES = {"0.5.10.post1": "sdist", "0.5.23": "wheel"}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def release(request, tmp_path_factory):
    version = request.param
    archive = pypi.download("sglang", version, prefer=RELEASES[version])
    dest = tmp_path_factory.mktemp("sglang-" + version)
    pypi.extract(archive, dest)
    [pkg] = [p.parent.parent for p in dest.rglob("srt/server_args.py") if p.parent.parent.name == "sglang"
             and "multimodal_gen" not in str(p)]
    return version, pkg


@pytest.fixture(scope="module")
def table(release):
    return sf.load_flag_table(str(release[1]))


def test_version_and_layout(release, table):
    version = release[0]
    assert table.version == version
    assert table.layout == ("server_args" if version == "0.5.10.post1" else "arg_groups")


@pytest.mark.parametrize("name", ["kimi-k2.5", "qwen3.5-397b-nvfp4"])
def test_reference_profiles_accepted_by_real_definitions(table, profiles, sm120_host, name):
    rendered = render(profiles[name], table, table.version, api_key_set=True)
    assert sf.check_argv(table, rendered["argv"]) == []
    result = sp.validate(sp.Context(name, profiles, facts=sm120_host, table=table, version=table.version,
                                    api_key_set=True))
    assert result["errors"] == [], [sp.format_problem(p) for p in result["errors"]]
    assert result["argv"] == rendered["argv"]


def test_misspelled_flag_rejected_with_suggestion(table, profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["extra_args"] = ["--fp4-gemm-runner-backend", "flashinfer_cudnn",
                                                    "--chunked-prefil-size", "8192"]
    result = sp.validate(sp.Context("qwen3.5-397b-nvfp4", profiles, facts=sm120_host, table=table,
                                    version=table.version))
    flags = {p["value"]: p for p in result["errors"]}
    assert set(flags) == {"--fp4-gemm-runner-backend", "--chunked-prefil-size"}
    assert "--fp4-gemm-backend" in flags["--fp4-gemm-runner-backend"]["fix"]
    assert "--chunked-prefill-size" in flags["--chunked-prefil-size"]["fix"]


def test_bad_choice_rejected(table, profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["moe_runner_backend"] = "flashinfer_cutlas"
    [p] = sp.validate(sp.Context("qwen3.5-397b-nvfp4", profiles, facts=sm120_host, table=table,
                                 version=table.version))["errors"]
    assert p["rule"] == "flag-drift" and p["variable"].endswith(".moe_runner_backend")
    assert "invalid choice" in p["reason"] and "flashinfer_cutlass" in p["fix"]


def test_parser_not_in_release(table, profiles, sm120_host):
    profiles["qwen3.5-397b-nvfp4"]["tool_call_parser"] = "qwen3"
    rules = [p["rule"] for p in sp.validate(sp.Context("qwen3.5-397b-nvfp4", profiles, facts=sm120_host,
                                                       table=table, version=table.version))["errors"]]
    assert "parsers" in rules


def test_parser_lists_match_facts(table):
    tools = set(table.choices_of("--tool-call-parser"))
    reasoning = set(table.choices_of("--reasoning-parser"))
    assert {"kimi_k2", "qwen3_coder", "hermes", "gigachat3"} <= tools and "qwen3" not in tools
    assert {"kimi_k2", "qwen3", "deepseek-r1", "nemotron_3"} <= reasoning
    assert ("auto" in tools) is (table.version == "0.5.23")


def test_release_specific_spellings(table):
    fp4 = set(table.choices_of("--fp4-gemm-backend"))
    if table.version == "0.5.10.post1":
        assert fp4 == {"auto", "cutlass", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm"}
        assert table.get("--flashinfer-allreduce-fusion-backend") is None
        assert table.choices_of("--speculative-algorithm") == ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
        assert table.get("--enable-hicache") is None
    else:
        assert fp4 == {"auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm",
                       "marlin"}
        assert table.get("--flashinfer-allreduce-fusion-backend").choices[0] == "auto"
        assert table.choices_of("--speculative-algorithm") is None  # free string in 0.5.23
        assert table.get("--enable-hicache") is table.get("--enable-hierarchical-cache")
    assert table.get("--fp4-gemm-runner-backend") is None
    assert table.get("--tp-size") is table.get("--tensor-parallel-size")
    assert not table.get("--enable-hierarchical-cache").takes_value


def test_kimi_rendering_per_release(table, profiles):
    rendered = render(profiles["kimi-k2.5"], table, table.version)
    if table.version == "0.5.10.post1":
        assert "--enable-flashinfer-allreduce-fusion" in rendered["argv"]
        assert rendered["env"]["SGLANG_ENABLE_SPEC_V2"] == "True"
    else:
        assert "--flashinfer-allreduce-fusion-backend" in rendered["argv"]
        assert "SGLANG_ENABLE_SPEC_V2" not in rendered["env"]


def test_gdn_backend_table_matches_sglang_source(release):
    """The release table's hybrid GDN sets (read by sglang_flags' AST reader) against a plain regex over
    the same release's attention_registry.py: two independent readings of SGLang's own assert."""
    version, pkg = release
    source = (pkg / "srt" / "layers" / "attention" / "attention_registry.py").read_text()
    facts = release_table(version).gdn_blackwell
    if version == "0.5.10.post1":
        gdn_block = source[source.index("hybrid_gdn_config is not None"):source.index("hybrid GDN models, use")]
        found = set(re.findall(r'attention_backend == "(\w+)"', gdn_block))
        assert set(facts["sm100"]) == set(facts["sm120"]) == found
        assert facts["checks"] == ["attention_backend"]
    else:
        found = set(re.findall(r'"(\w+)"', re.search(r"is_sm120:\s*\n\s*allowed = \{([^}]*)\}", source).group(1)))
        assert set(facts["sm120"]) == found == {"triton", "trtllm_mha", "flashinfer"}
        assert facts["checks"] == ["decode_attention_backend", "prefill_attention_backend"]
    assert sf.read_gdn_blackwell_backends(str(pkg)) == facts
