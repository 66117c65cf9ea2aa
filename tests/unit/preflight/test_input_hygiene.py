"""Strings that would break the unit, numbers that are not numbers, paths that name no fixed place,
and secrets in plain inventory: refused with the variable, the value, the reason and the fix.

Facts injected: 8 x SM120, 512 GiB; flags from the 0.5.23 entry of the release table."""

import pytest
from support.adversarial_secrets import ADVERSARIAL

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    RenderError, check_rendered, control_characters, render, systemd_quote)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table

Q, K = "qwen3.5-397b-nvfp4", "kimi-k2.5"


def run(profiles, name, facts, **kw):
    return sp.validate(sp.Context(name, profiles, facts=facts, table=release_table("0.5.23"), version="0.5.23", **kw))


def rule_errors(result, rule):
    return [p for p in result["errors"] if p["rule"] == rule]


# -- control characters: one check for every string that reaches the unit, env file or argv ----------
CHARS = {"LF": "\n", "CR": "\r", "NUL": "\x00", "TAB": "\t", "ESC": "\x1b", "DEL": "\x7f", "NEL": "\x85",
         "LINE SEPARATOR": "\u2028"}
PLACES = [
    (Q, ("model_path",)), (Q, ("served_model_name",)), (Q, ("host",)), (Q, ("tool_call_parser",)),
    (Q, ("reasoning_parser",)), (Q, ("attention_backend",)), (Q, ("quantization",)),
    (K, ("speculative", "draft_model_path")), (K, ("speculative", "algorithm")), (K, ("hicache", "write_policy")),
    (Q, ("env", "NCCL_IB_DISABLE")),
]


@pytest.mark.parametrize("char", sorted(CHARS))
@pytest.mark.parametrize("name,keys", PLACES)
def test_control_character_anywhere_rendered(profiles, sm120_host, name, keys, char):
    node = profiles[name]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = str(node[keys[-1]]) + CHARS[char] + "x"
    [p] = rule_errors(run(profiles, name, sm120_host), "control-characters")
    assert p["variable"] == sp.Context(name, profiles).var(*keys)
    assert "one line" in p["fix"] and ("at %d" % (len(str(p["value"])) - 2)) in p["reason"]


def test_yaml_block_scalar_newline_in_model_path(profiles, sm120_host):
    profiles[Q]["model_path"] = "/shared/Qwen3.5-397B-A17B-NVFP4\n"  # model_path: | ... adds this
    [p] = run(profiles, Q, sm120_host)["errors"]
    assert p["rule"] == "control-characters" and "line feed" in p["reason"] and "'>-'" in p["fix"]


def test_control_character_in_env_name_and_extra_args(profiles, sm120_host):
    profiles[Q]["env"]["BAD\rNAME"] = "1"
    profiles[Q]["extra_args"] = ["--chunked-prefill-size", "8192\x00"]
    found = {p["variable"] for p in rule_errors(run(profiles, Q, sm120_host), "control-characters")}
    assert found == {"llm_server_models['%s'].env (key)" % Q, "llm_server_models['%s'].extra_args[1]" % Q}


def test_control_characters_in_unit_settings_extra_env_and_secrets(profiles, sm120_host):
    result = run(profiles, Q, sm120_host,
                 unit_settings={"sglang_service_python": "/opt/venv/bin/python\n", "sglang_service_after": ["a\n"]},
                 extra_env={"OK": "x\ry"}, base_env={"PATH": "/usr/local/cuda/bin\n"},
                 secrets={"llm_server_api_key": "sk-secret\n"},
                 secret_env={"WANDB_API_KEY": "k\x00"})
    found = {p["variable"]: p for p in rule_errors(result, "control-characters")}
    assert set(found) == {"sglang_service_python", "sglang_service_after[0]", "sglang_service_extra_env['OK']",
                          "cuda_toolkit_env['PATH']",
                          "llm_server_api_key", "sglang_service_secret_env['WANDB_API_KEY']"}
    for name in ("llm_server_api_key", "sglang_service_secret_env['WANDB_API_KEY']"):
        assert found[name]["value"] == "(secret, not shown)"
        assert "sk-secret" not in sp.format_problem(found[name]) and "k\\u0000" not in sp.format_problem(found[name])
        assert "printf %s" in found[name]["fix"]


def test_notes_and_smoke_test_may_hold_line_breaks(profiles, sm120_host):
    profiles[Q]["notes"]["tp_size"] = "line one\nline two"  # notes go to the Markdown record only
    profiles[Q]["smoke_test"] = {"prompt": "Say hi.\n"}
    assert run(profiles, Q, sm120_host)["errors"] == []


def test_the_renderer_refuses_control_characters_itself(profiles):
    """Defence in depth: even if a rule missed it, render(), check_rendered() and systemd_quote() refuse."""
    profiles[Q]["served_model_name"] = "qwen\nExecStartPre=/bin/sh -c evil"
    with pytest.raises(RenderError):
        render(profiles[Q])
    unchecked = render(profiles[Q], check=False)
    with pytest.raises(RenderError):
        check_rendered(unchecked)
    with pytest.raises(RenderError):
        systemd_quote(unchecked["argv"])
    with pytest.raises(RenderError):
        check_rendered({"argv": [], "env": {"A": "b\r"}})


def test_control_characters_names_them():
    assert control_characters("ok") == []
    assert control_characters("a\nb\x00") == ["\\n (line feed) at 1", "\\x00 (nul) at 3"]


# -- NaN and infinity ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["mem_fraction_static", "expected_size_gb"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_yaml_nan_and_inf_in_the_profile(profiles, sm120_host, key, value):
    profiles[Q][key] = value
    [p] = rule_errors(run(profiles, Q, sm120_host), "finite-numbers")
    assert p["variable"].endswith("." + key) and "finite" in p["reason"]


def test_nan_in_hicache_and_in_extra_args(profiles, sm120_host):
    profiles[K]["hicache"]["ratio"] = float("nan")
    profiles[K]["extra_args"] = ["--mem-fraction-static", "NaN"]
    found = {p["variable"] for p in rule_errors(run(profiles, K, sm120_host), "finite-numbers")}
    assert found == {"llm_server_models['%s'].hicache.ratio" % K, "llm_server_models['%s'].extra_args[1]" % K}


# -- paths -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("keys,value,words", [
    (("model_path",), "models/kimi", "absolute"),
    (("model_path",), "/shared/../kimi-k2.5-int4", "'..'"),
    (("speculative", "draft_model_path"), "kimi-k2.5-eagle3", "absolute"),
    (("speculative", "draft_model_path"), "/shared/x/../../kimi-k2.5-eagle3", "'..'"),
    (("model_path",), "/", "root"),
])
def test_paths(profiles, sm120_host, keys, value, words):
    node = profiles[K]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    [p] = rule_errors(run(profiles, K, sm120_host), "paths")
    assert p["variable"] == sp.Context(K, profiles).var(*keys) and words in p["reason"]


def test_relative_draft_path_in_extra_args(profiles, sm120_host):
    del profiles[K]["speculative"]["draft_model_path"]
    profiles[K]["extra_args"] = ["--speculative-draft-model-path", "./eagle3"]
    [p] = rule_errors(run(profiles, K, sm120_host), "paths")
    assert p["variable"].endswith(".extra_args[1]")


# -- secrets in plain inventory ----------------------------------------------------------------------
@pytest.mark.parametrize("words", [["--api-key", "sk-123"], ["--api-key=sk-123"], ["--admin-api-key", "x"],
                                   ["--ssl-keyfile-password", "x"]])
def test_secret_flags_in_extra_args(profiles, sm120_host, words):
    profiles[Q]["extra_args"] = words
    [p] = rule_errors(run(profiles, Q, sm120_host), "secrets")
    assert p["variable"].endswith(".extra_args[0]") and "0644" in p["reason"]
    assert "sk-123" not in p["fix"] and "sk-123" != p["value"]
    if words[0].startswith("--api-key"):
        assert "llm_server_api_key" in p["fix"]


def test_the_api_key_placeholder_is_not_a_secret_in_the_argv(profiles, sm120_host):
    assert run(profiles, Q, sm120_host, api_key_set=True)["errors"] == []


@pytest.mark.parametrize("name,fix", [("HF_TOKEN", "llm_server_hf_token"), ("HUGGING_FACE_HUB_TOKEN", "llm_server_hf_token"),
                                      ("WANDB_API_KEY", "sglang_service_secret_env"),
                                      ("AWS_SECRET_ACCESS_KEY", "sglang_service_secret_env"),
                                      ("DB_PASSWORD", "sglang_service_secret_env")])
def test_token_like_env_names(profiles, sm120_host, name, fix):
    profiles[Q]["env"][name] = "value-not-to-print"
    [p] = rule_errors(run(profiles, Q, sm120_host), "secrets")
    assert p["variable"] == "llm_server_models['%s'].env.%s" % (Q, name) and fix in p["fix"]
    assert "value-not-to-print" not in sp.format_problem(p)


@pytest.mark.parametrize("name", ["NCCL_IB_DISABLE", "TOKENIZERS_PARALLELISM", "SGLANG_MAX_TOKENS", "CUDA_DEVICE_ORDER"])
def test_ordinary_env_names_are_not_secrets(profiles, sm120_host, name):
    profiles[Q]["env"][name] = "1"
    assert rule_errors(run(profiles, Q, sm120_host), "secrets") == []


def test_secret_in_extra_env_and_hf_token_value_anywhere(profiles, sm120_host):
    profiles[Q]["notes"]["hub_repo"] = "download with hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"
    result = run(profiles, Q, sm120_host, extra_env={"OPENAI_API_KEY": "x"})
    found = {p["variable"] for p in rule_errors(result, "secrets")}
    assert found == {"sglang_service_extra_env['OPENAI_API_KEY']", "llm_server_models['%s'].notes.hub_repo" % Q}
    assert all("hf_abc" not in sp.format_problem(p) for p in result["errors"])


# -- issue 34: operator settings written into the unit, and secrets the launcher can protect -------------
UNIT_DEFAULTS = {
    "sglang_service_python": "/opt/sglang/venv/bin/python", "sglang_service_restart_marker": "/var/lib/gpufleet/sglang/restart-pending",
    "sglang_service_read_write_paths": ["/var/lib/gpufleet-test", "-/srv/optional"], "sglang_service_launcher":
    "/usr/local/libexec/gpufleet/gpufleet-launch", "sglang_service_credential_dir": "/etc/gpufleet/sglang/credentials",
    "sglang_service_nvidia_modprobe": "/usr/bin/nvidia-modprobe", "sglang_service_working_dir": "/var/lib/sglang",
    "sglang_service_env_file": "/etc/gpufleet/sglang/x.env", "sglang_service_state_dir": "/var/lib/gpufleet/sglang",
    "sglang_service_state_directory": "sglang", "sglang_service_cache_directory": "sglang",
    "sglang_service_user": "sglang", "sglang_service_group": "sglang", "sglang_service_supplementary_groups": ["video"],
    "sglang_service_after": ["network-online.target", "nvidia-persistenced.service"],
    "sglang_service_unit_extra": ["Environment=A=%h"],  # free-form lines: the operator's own systemd syntax
}


def test_default_unit_settings_pass(profiles, sm120_host):
    assert rule_errors(run(profiles, Q, sm120_host, unit_settings=UNIT_DEFAULTS), "unit-settings") == []


# The values issue 34 found reaching the unit (python, marker, read-write paths), and the other paths.
@pytest.mark.parametrize("name,value,reason", [
    ("sglang_service_python", "/usr/bin/python3 -c import os%h$HOME", "'%'"),
    ("sglang_service_python", "python3", "not an absolute path"),
    ("sglang_service_restart_marker", "/var/lib/%h/marker", "'%'"),
    ("sglang_service_restart_marker", "/var/lib/$HOME/marker", "'$'"),
    ("sglang_service_restart_marker", "/var/lib/gpufleet/../..;x", "'..'"),
    ("sglang_service_read_write_paths", ["/srv/ok", "/srv/%n"], "'%'"),
    ("sglang_service_read_write_paths", ["/srv/../etc"], "'..'"),
    ("sglang_service_read_write_paths", ["/srv/with space"], "whitespace"),
    ("sglang_service_launcher", '/usr/local/"x', "double quote"),
    ("sglang_service_credential_dir", "/etc/gpufleet/./credentials", "'.'"),
    ("sglang_service_nvidia_modprobe", "/usr/bin/nvidia-modprobe\\x20", "backslash"),
    ("sglang_service_env_file", "/etc/gpufleet/x'.env", "single quote"),
    ("sglang_service_working_dir", "/var//lib/sglang", "'//'"),
    ("sglang_service_state_directory", "../etc", "relative, no '..'"),
    ("sglang_service_user", "sg%ilang", "'%'"),
    ("sglang_service_after", ["a.service", "$X.service"], "'$'"),
])
def test_unit_settings_refused_with_variable_value_and_fix(profiles, sm120_host, name, value, reason):
    [p] = rule_errors(run(profiles, Q, sm120_host, unit_settings={name: value}), "unit-settings")
    index = next((i for i, v in enumerate(value) if v not in ("/srv/ok", "a.service")), 0) if isinstance(value, list) else None
    assert p["variable"] == (name if index is None else "%s[%d]" % (name, index))
    assert p["value"] == (value if index is None else value[index])
    assert reason in p["reason"] and "nothing was changed" in p["reason"]
    assert p["fix"]
    if name != "sglang_service_state_directory" and name != "sglang_service_user" and name != "sglang_service_after":
        assert "absolute path" in p["fix"] and "%" not in p["fix"].split("e.g. ")[1]


def test_empty_optional_unit_settings_pass_required_refused(profiles, sm120_host):
    result = run(profiles, Q, sm120_host, unit_settings={
        "sglang_service_restart_marker": "", "sglang_service_nvidia_modprobe": "", "sglang_service_python": ""})
    assert [p["variable"] for p in rule_errors(result, "unit-settings")] == ["sglang_service_python"]


# The eleven adversarial secrets (tests/support/adversarial_secrets.py): gpufleet-launch redacts them
# in every encoding, so preflight accepts them; a shorter one it cannot protect is refused (not shown).
@pytest.mark.parametrize("secret", ADVERSARIAL)
def test_adversarial_secrets_accepted(profiles, sm120_host, secret):
    result = run(profiles, Q, sm120_host, secrets={"llm_server_api_key": secret},
                 secret_env={"WANDB_API_KEY": secret})
    assert result["errors"] == []


def test_short_secret_refused_without_showing_it(profiles, sm120_host):
    result = run(profiles, Q, sm120_host, secrets={"llm_server_api_key": "k3y", "llm_server_hf_token": ""},
                 secret_env={"WANDB_API_KEY": "1234567"})
    found = {p["variable"]: p for p in rule_errors(result, "secret-length")}
    assert set(found) == {"llm_server_api_key", "sglang_service_secret_env['WANDB_API_KEY']"}
    for p in found.values():
        assert p["value"] == "(secret, not shown)" and "k3y" not in sp.format_problem(p)
        assert "8 characters" in p["reason"] and "openssl rand" in p["fix"]
