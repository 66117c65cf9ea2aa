# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action for gpufleet.llm_server.role_inputs (documentation: plugins/modules/role_inputs.py).

Runs on the controller only, with no connection: it reads each role's meta/argument_specs.yml and
defaults/main.yml from this collection, templates the options from the task's variables (role
defaults below everything else, as Ansible layers them), and judges them with
plugins/module_utils/role_inputs.py. A module could not do this: the role files and the variables
live on the controller.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.llm_server.plugins.module_utils import role_inputs
from ansible_collections.gpufleet.llm_server.plugins.plugin_utils import role_vars

ARGUMENT_SPEC = {
    "roles": {"type": "list", "elements": "str", "required": True},
    "entry_point": {"type": "str", "default": "main"},
    "skip_options": {"type": "list", "elements": "str", "default": []},
    "defer_undefined": {"type": "bool", "default": False},
    "record": {"type": "bool", "default": True},
    "also_found": {"type": "list", "elements": "str", "default": []},
}

FACT = "gpufleet_llm_server_checked_roles"
PREFIX = "gpufleet.llm_server."
ROLES_DIR = role_vars.ROLES_DIR


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        skip = set(args["skip_options"])
        problems, checked, deferred = {}, [], {}
        for name in args["roles"]:
            role = name[len(PREFIX):] if name.startswith(PREFIX) else name
            specs = role_vars.load(self._loader, role_vars.role_file(role, "meta", "argument_specs.yml"), trusted=False)
            if specs is None:
                problems[role] = ["role_inputs: no roles/%s/meta/argument_specs.yml in this collection (%s); "
                                  "name one of its roles." % (role, ROLES_DIR)]
                continue
            options = role_inputs.entry_options(specs, args["entry_point"])
            # The role's private vars/main.yml and defaults below the task variables (plugin_utils/role_vars.py).
            variables, templar = role_vars.role_variables(self._loader, self._templar, role, task_vars)
            values, undefined, errors = {}, [], []
            wanted = [option for option in options if option not in skip] + list(role_inputs.EXTRA_VARIABLES.get(role, ()))
            for option in wanted:
                if option not in variables:
                    continue
                try:
                    values[option] = templar.template(variables[option])
                except AnsibleUndefinedVariable as exc:
                    undefined.append(option)
                    errors.append("%s cannot be templated: %s" % (option, exc.message))
                except AnsibleError as exc:
                    errors.append("%s cannot be templated: %s" % (option, exc.message))
            if undefined and args["defer_undefined"] and len(undefined) == len(errors):
                # A value that follows a variable set later in the run: the role checks itself when it starts.
                deferred[role] = undefined
                continue
            if not errors:
                errors = role_inputs.check_role(role, {k: v for k, v in options.items() if k not in skip}, values)
            if errors:
                problems[role] = errors
            else:
                checked.append(role)
        result["changed"] = False
        result["checked"] = checked
        result["deferred"] = deferred
        result["problems"] = problems
        if problems:
            result["failed"] = True
            result["msg"] = role_inputs.format_report(problems)
            if args["also_found"]:  # the preflight controller pass's, which waited for the host pass
                result["msg"] += "%sPreflight also found, before connecting (nothing was changed):%s%s" % (
                    os.linesep, os.linesep, os.linesep.join(args["also_found"]))
            return result
        if args["record"]:
            before = task_vars.get(FACT) or []
            result["ansible_facts"] = {FACT: list(before) + [role for role in checked if role not in before]}
        result["msg"] = "variables of %s are valid%s" % (
            ", ".join(checked) or "no role",
            ("; left to the role itself (they follow variables set later in the run): %s"
             % ", ".join("%s (%s)" % (role, ", ".join(names)) for role, names in deferred.items())) if deferred else "")
        return result
