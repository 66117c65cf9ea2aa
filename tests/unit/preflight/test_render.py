"""Profile -> argv/env rendering and systemd quoting (pure functions, no SGLang tree)."""

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    API_KEY_PLACEHOLDER, render, systemd_quote)


def test_render_is_a_list_with_the_api_key_placeholder(profiles):
    out = render(profiles["kimi-k2.5"], api_key_set=True)
    argv = out["argv"]
    assert argv[argv.index("--api-key") + 1] == API_KEY_PLACEHOLDER
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


def test_systemd_quote_escapes_specials_but_not_the_placeholder():
    line = systemd_quote(["--model-path", "/m/a b", 'say "hi"', "100%", "$HOME", "back\\slash", API_KEY_PLACEHOLDER])
    assert line == ('"--model-path" "/m/a b" "say \\"hi\\"" "100%%" "$$HOME" "back\\\\slash" '
                    "${GPUFLEET_SGLANG_API_KEY}")
