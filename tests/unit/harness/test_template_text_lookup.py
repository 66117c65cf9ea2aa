"""gpufleet.llm_server.template_text renders exactly what ansible.builtin.template's lookup renders, without its deep
copy of the variables (plugins/lookup/template_text.py; issue 20).

Real ansible-playbook runs on localhost (tests/support/ansible_harness.py); no test double.
"""

from __future__ import annotations

import json

from ansible.plugins.lookup import template as builtin_template

from ansible_collections.gpufleet.llm_server.plugins.lookup import template_text
from support.ansible_harness import run_playbook

# Every feature the roles' templates use (ansible_managed | comment, loops, filters, a nested variable, trailing
# newlines), and the options and added variables of the builtin lookup.
TEMPLATE = """{{ ansible_managed | comment }}
[unit]
name={{ service.name }}
{% for key, value in service.env | dictsort %}
{{ key }}={{ value | quote }}
{% endfor %}
path={{ template_path | basename }} extra={{ extra | default('none') }}
{# a comment #}
"""
ALTERNATE = "<< service.name >> [# not a comment #] {# kept #}\n"


def lookups(name: str) -> dict:
    plugin = "gpufleet.llm_server.template_text" if name == "ours" else "ansible.builtin.template"
    return {
        f"{name}_plain": "{{ lookup('%s', 'unit.j2') }}" % plugin,
        f"{name}_vars": "{{ lookup('%s', 'unit.j2', template_vars={'extra': 'x y'}) }}" % plugin,
        f"{name}_strings": ("{{ lookup('%s', 'alternate.j2', variable_start_string='<<', variable_end_string='>>',"
                            " comment_start_string='[#', comment_end_string='#]') }}" % plugin),
        f"{name}_two": "{{ lookup('%s', 'unit.j2', 'alternate.j2', wantlist=true) }}" % plugin,
    }


def test_same_text_as_the_builtin_lookup_for_every_option(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "unit.j2").write_text(TEMPLATE)
    (tmp_path / "templates" / "alternate.j2").write_text(ALTERNATE)
    facts = {**lookups("builtin"), **lookups("ours")}
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"service": {"name": "sglang", "env": {"B": "two words", "A": "1"}}},
             "tasks": [{"name": "render", "ansible.builtin.set_fact": facts},
                       {"name": "after", "ansible.builtin.debug": {"msg": "{{ extra | default('unset') }}"}}]}]
    result = run_playbook(tmp_path, json.dumps(play))
    assert result.rc == 0, result.stdout + result.stderr
    rendered = result.host_results("localhost")[0]["ansible_facts"]
    for key in lookups("builtin"):
        ours = rendered[key.replace("builtin", "ours")]
        assert ours == rendered[key], key
    assert "name=sglang" in rendered["ours_plain"] and "A=1\nB='two words'" in rendered["ours_plain"]
    assert "extra=x y" in rendered["ours_vars"] and "extra=none" in rendered["ours_plain"]
    assert rendered["ours_strings"] == "sglang  {# kept #}\n"
    assert len(rendered["ours_two"]) == 2
    # template_vars reach the template only, not the play.
    assert result.host_results("localhost")[1]["msg"] == "unset"


class NoDeepCopy(dict):
    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied")


def test_variables_are_copied_at_the_top_level_only_and_the_builtin_is_restored():
    variables = {"big": NoDeepCopy(a=1)}
    assert builtin_template.deepcopy is not template_text._top_level_copy
    copied = template_text._top_level_copy(variables)
    copied["added"] = 1
    assert "added" not in variables and copied["big"] is variables["big"]
    # The builtin lookup deep-copies through the module-level name this plugin swaps (ansible-core 2.19): if a
    # newer core renames it, this fails and the swap is to be revisited.
    assert builtin_template.deepcopy.__module__ == "copy"
