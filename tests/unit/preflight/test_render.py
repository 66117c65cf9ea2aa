"""Profile -> argv/env rendering and systemd quoting (pure functions, no SGLang tree)."""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    API_KEY_PLACEHOLDER, RenderError, render, systemd_quote, unit_args)


def test_render_is_a_list_with_the_api_key_placeholder(profiles):
    profiles["kimi-k2.5"]["extra_args"] = ["--log-level", "info"]
    out = render(profiles["kimi-k2.5"], api_key_set=True)
    argv = out["argv"]
    # Last, after extra_args: where gpufleet-launch appends --api-key=<key> inside the process.
    assert argv[-2:] == ["--api-key", API_KEY_PLACEHOLDER] and argv[-4:-2] == ["--log-level", "info"]
    assert unit_args(argv) == argv[:-2] and "--api-key" not in unit_args(argv)
    assert argv[argv.index("--hicache-ratio") + 1] == "4.0"
    assert "--enable-torch-symm-mem" in argv and "--disable-custom-all-reduce" in argv
    assert out["env"]["SGLANG_ENABLE_SPEC_V2"] == "True"  # release unknown: the env is harmless where removed


def test_notes_and_smoke_test_do_not_affect_the_argv(profiles):
    before = render(profiles["kimi-k2.5"])
    profiles["kimi-k2.5"]["notes"]["extra"] = "changed"
    profiles["kimi-k2.5"]["smoke_test"] = {"prompt": "x"}
    assert render(profiles["kimi-k2.5"]) == before


def test_hicache_size_overrides_ratio(profiles):
    profiles["kimi-k2.5"]["hicache"]["size_gb"] = 40
    argv = render(profiles["kimi-k2.5"])["argv"]
    assert "--hicache-size" in argv and "--hicache-ratio" not in argv


def test_systemd_quote_escapes_specials_and_refuses_the_placeholder():
    line = systemd_quote(["--model-path", "/m/a b", 'say "hi"', "100%", "$HOME", "back\\slash"])
    assert line == ('"--model-path" "/m/a b" "say \\"hi\\"" "100%%" "$$HOME" "back\\\\slash"')
    # The key is never an ExecStart word (its argv is world-readable in /proc/<pid>/cmdline).
    with pytest.raises(RenderError, match="credential api-key"):
        systemd_quote(["--api-key", API_KEY_PLACEHOLDER])
