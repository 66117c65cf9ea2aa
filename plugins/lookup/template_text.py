# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible.builtin.template's lookup without its deep copy of every variable.

ansible-core's template lookup starts each file with ``deepcopy(variables)`` (its own FIXME asks why), so that the
variables it adds (``template_path``, ``ansible_managed``, ``template_vars``) do not leak into the task's. With a
role's defaults, the package data and the registered results of a whole site.yml in scope, that copy was 5 % of the
controller's CPU on a no-op site.yml (py-spy, issue 20; docs/performance.md): the roles compare about fifteen
rendered files with the host's on every run. The added variables only need a new top-level mapping, so this lookup
runs the same code with a shallow copy: same search path, same options, same result, byte for byte
(tests/unit/harness/test_template_text_lookup.py compares the two on templates that use every option).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: template_text
author:
  - gpufleet maintainers (@gpufleet)
short_description: render a template to a string, as ansible.builtin.template's lookup does, without copying every variable
version_added: 1.0.0
description:
  - Renders each file like P(ansible.builtin.template#lookup) (same search path, options and result), with a
    shallow copy of the variables instead of a deep copy, so that a large play pays no copy per file.
  - The variables the lookup adds (C(template_path), C(ansible_managed), O(template_vars)) go into the copy's top
    level, as with ansible.builtin.template; nested values are shared with the task, as in any other templating.
options:
  _terms:
    description: The template files, looked up like ansible.builtin.template's (the role's C(templates/) first).
    required: true
  template_vars:
    description: Additional variables for the template, as ansible.builtin.template's.
    default: {}
    type: dict
  variable_start_string:
    description: As ansible.builtin.template's.
    default: '{{'
    type: str
  variable_end_string:
    description: As ansible.builtin.template's.
    default: '}}'
    type: str
  comment_start_string:
    description: As ansible.builtin.template's.
    default: '{#'
    type: str
  comment_end_string:
    description: As ansible.builtin.template's.
    default: '#}'
    type: str
  trim_blocks:
    description: As ansible.builtin.template's.
    type: bool
    default: true
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Compare a rendered file with the host's copy (as lookup('ansible.builtin.template', ...) would render it)
  gpufleet.llm_server.server_file:
    dest: /etc/example.conf
    content: "{{ lookup('gpufleet.llm_server.template_text', 'example.conf.j2') }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each file.
  type: list
  elements: str
"""

import copy

from ansible.plugins.lookup import template as builtin_template


def _top_level_copy(variables, memo=None, _nil=None):
    """What ansible.builtin.template's lookup needs from its copy: a mapping of its own to add variables to."""
    del memo, _nil
    return dict(variables)


class LookupModule(builtin_template.LookupModule):
    def run(self, terms, variables=None, **kwargs):
        # The builtin's run, with its module-level `deepcopy` (used for the variables only) swapped for the
        # top-level copy while it runs. A worker process runs one task's lookups one after another.
        deep = getattr(builtin_template, "deepcopy", copy.deepcopy)
        builtin_template.deepcopy = _top_level_copy
        try:
            return super().run(terms, variables, **kwargs)
        finally:
            builtin_template.deepcopy = deep
