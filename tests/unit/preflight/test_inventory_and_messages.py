"""The inventory checks of the connection-free pass, wrongly shaped inventories, and the wording of
refusals: every one names the variable, the value, the reason and a concrete fix, all at once."""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_preflight as sp
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table

Q = "qwen3.5-397b-nvfp4"
INVENTORY = {"hostname": "llm-server", "placeholder_markers": ["REPLACE_WITH", "CHANGE_ME"],
             "inventory_dir": "inventories/production"}


def run(name, profiles, address=None, **kw):
    inventory = dict(INVENTORY)
    if address is not None:
        inventory["host_address"] = address
    return sp.validate(sp.Context(name, profiles, table=release_table("0.5.23"), version="0.5.23",
                                  inventory=inventory, **kw))


def test_placeholder_host_and_profile_errors_in_one_run(profiles):
    """Today's first run used to stop at the placeholder; the profile's errors came one run later."""
    profiles[Q].update(attention_backend="flashinfr", extra_args=["--chunked-prefil-size", "1"])
    result = run(Q, profiles, address="REPLACE_WITH_SERVER_ADDRESS")
    rules = [p["rule"] for p in result["errors"]]
    assert rules[0] == "inventory" and "flag-drift" in rules and len(result["errors"]) == 3
    [host] = [p for p in result["errors"] if p["rule"] == "inventory"]
    assert host["variable"] == "ansible_host (llm-server)" and "inventories/production/hosts.yml" in host["fix"]


@pytest.mark.parametrize("address,words", [("", "empty"), ("   ", "empty"), ("CHANGE_ME", "placeholder"),
                                           ("10.0.0.1 # prod", "whitespace"), ("10.0.0.1\n", "whitespace")])
def test_bad_ansible_host(profiles, address, words):
    [p] = run(Q, profiles, address=address)["errors"]
    assert p["rule"] == "inventory" and words in p["reason"] and "ansible_host for llm-server" in p["fix"]


def test_ansible_host_unset_is_fine(profiles):
    assert run(Q, profiles)["errors"] == []


def test_missing_model_choice_names_the_host_vars_file_and_the_profiles(profiles):
    [p] = run(None, profiles)["errors"]
    assert p["variable"] == "llm_server_model (llm-server)"
    assert "inventories/production/host_vars/llm-server.yml" in p["fix"]
    assert "['kimi-k2.5', 'qwen3.5-397b-nvfp4']" in p["fix"]


def test_model_choice_not_a_string(profiles):
    [p] = run(["kimi-k2.5"], profiles)["errors"]
    assert "a list of 1 item" in p["reason"] and "kimi-k2.5" in p["fix"]


def test_misspelled_model_choice_suggests_the_profile(profiles):
    [p] = run("kimi-k2-5", profiles)["errors"]
    assert p["rule"] == "profile-exists" and "did you mean 'kimi-k2.5'" in p["fix"]


def test_profiles_written_as_a_list_print_no_class_name(profiles):
    as_list = [dict(profile, name=name) for name, profile in profiles.items()]
    [p] = run(Q, as_list)["errors"]
    text = sp.format_problem(p)
    assert "a list of 2 items" in p["reason"] and "kimi-k2.5:" in p["fix"] and "qwen3.5-397b-nvfp4:" in p["fix"]
    assert "<class" not in text and "'list'" not in text and "dict" not in text


def test_profiles_undefined_or_a_string(profiles):
    [p] = run(Q, None)["errors"]
    assert p["variable"] == "llm_server_models" and "group_vars/llm_servers/models.yml" in p["fix"]
    [p] = run(Q, "kimi-k2.5")["errors"]
    assert "a string" in p["reason"]


def test_a_profile_that_is_a_string_gets_an_example(profiles):
    profiles[Q] = "/shared/Qwen3.5-397B-A17B-NVFP4"
    [p] = run(Q, profiles)["errors"]
    assert "see the profile schema" not in p["fix"]
    assert "model_path" in p["fix"] and "served_model_name" in p["fix"] and "tp_size" in p["fix"]


def test_type_messages_use_the_right_article_and_say_what_was_given(profiles):
    profiles[Q].update(tp_size="8", expected_size_gb="223")
    found = {p["variable"]: p for p in run(Q, profiles)["errors"]}
    tp = found["llm_server_models['%s'].tp_size" % Q]
    assert tp["reason"] == 'must be an integer, but it is a string ("8")' and "without quotes" in tp["fix"]
    assert "a integer" not in sp.format_problem(tp)
    assert "must be an integer or number" in found["llm_server_models['%s'].expected_size_gb" % Q]["reason"]


def test_unknown_key_suggests_the_close_one(profiles):
    profiles[Q]["attention_backnd"] = "triton"
    [p] = [p for p in run(Q, profiles)["errors"] if p["rule"] == "schema"]
    assert p["fix"].startswith("rename it to attention_backend")


def test_deprecation_warning_shows_the_set_value_not_unset(profiles):
    result = run("kimi-k2.5", profiles)
    deprecated = [w for w in result["warnings"] if w["rule"] == "deprecated"]
    assert deprecated and all(w["value"] is not None for w in deprecated)
    assert all("(unset)" not in sp.format_problem(w) for w in deprecated)


def test_every_refusal_has_variable_value_reason_and_fix(profiles):
    """A profile with one mistake per rule that can fire without host facts: each message is complete."""
    profiles[Q].update(tp_size=0, attention_backend="flashinfer", extra_args=["--api-key", "x", "--enable-metrics=1"],
                       model_path="rel/path", mem_fraction_static=float("nan"), host="0.0.0.0")
    profiles[Q]["env"]["HF_TOKEN"] = "t"
    result = run(Q, profiles, address="REPLACE_WITH_X")
    assert {"inventory", "ranges", "paths", "secrets", "flag-drift", "finite-numbers"} <= \
        {p["rule"] for p in result["errors"]}
    for p in result["errors"]:
        assert p["variable"] and p["reason"] and p["fix"] and p["source"], p
        assert "fix the value" not in p["fix"] and "see the profile schema" not in p["fix"]
        text = sp.format_problem(p)
        assert text.startswith("[%s] %s = " % (p["rule"], p["variable"])) and "Fix: " in text
