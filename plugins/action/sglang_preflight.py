# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action for gpufleet.llm_server.sglang_preflight (documentation: plugins/modules/sglang_preflight.py).

- host_checks false (the inventory pass before any connection), or profile_checks false (checks that
  read nothing from the host): the checks run here, in the controller's process. Shipping the module
  to localhost cost a fork, an AnsiballZ build and a Python start per host on every run.
- node_facts true: the multi-node facts are worked out here from the inventory
  (module_utils/sglang_multinode.py), then passed to the checks.
- Otherwise the module runs on the host, as a module would.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_multinode import MultinodeError, node_facts
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight import format_problem
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import (
    ACTION_ONLY, ARGUMENT_SPEC, run)

MODULE = "gpufleet.llm_server.sglang_preflight"
NODE_ARGS = ("node_rank", "dist_init_addr", "node_gpu_counts")


def _also_found(problems):
    if not problems:
        return ""
    return "%sPreflight also found, before connecting (nothing was changed):%s%s" % (
        os.linesep, os.linesep, os.linesep.join(format_problem(p) for p in problems))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _inventory_nodes(self, task_vars, hostname):
        """(llm_server_node_group, groups, the group's hosts as sglang_multinode.node_facts reads them)."""
        group = task_vars.get("llm_server_node_group")
        group = self._templar.template(group) if group is not None else None
        groups = {name: list(members) for name, members in (task_vars.get("groups") or {}).items()}
        hostvars = task_vars.get("hostvars") or {}
        hosts = {}
        for name in groups.get(group, []) if isinstance(group, str) else []:
            if name not in hostvars:
                continue
            view = hostvars[name]
            # HostVarsVars templates on access, in that host's context.
            entry = {key: (view[key] if key in view else None)
                     for key in ("llm_server_model", "llm_server_node_address", "ansible_host")}
            facts = view["ansible_facts"] if "ansible_facts" in view else {}
            gpu_info = facts.get("gpu_info") if isinstance(facts, dict) else None
            entry["gpu_count"] = gpu_info.get("gpu_count") if isinstance(gpu_info, dict) else None
            hosts[name] = entry
        return group, groups, hosts

    def _unreachable(self, out):
        """The controller pass deferred its problems to the host pass: if the host cannot be reached, refuse now."""
        try:
            self._low_level_execute_command("true", sudoable=False)
        except AnsibleConnectionFailure as exc:
            for key in ("deferred", "deferred_report", "msg"):
                out.pop(key, None)
            errors = out["errors"]
            return ("Preflight refused %s: %d problem(s), nothing was changed; the host could not be reached (%s), "
                    "so its read-only checks (GPUs, RAM, disk, config.json) did not run:%s%s"
                    % (self._task_vars_host, len(errors), str(exc).strip().splitlines()[0] if str(exc).strip() else
                       "no reason given", os.linesep, os.linesep.join(format_problem(e) for e in errors)))
        return None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        self._task_vars_host = task_vars.get("inventory_hostname") or "this host"
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        no_log_values = validation._no_log_values
        module_args = {key: value for key, value in self._task.args.items() if key not in ACTION_ONLY}

        if args["node_facts"]:
            given = [name for name in NODE_ARGS if args[name] is not None]
            if given:
                result.update(failed=True, msg="sglang_preflight: node_facts works out %s itself; give node_facts or "
                                               "%s, not both." % (", ".join(NODE_ARGS), ", ".join(given)))
                return result
            hostname = task_vars.get("inventory_hostname")
            group, groups, hosts = self._inventory_nodes(task_vars, hostname)
            try:
                facts = node_facts(hostname, args["profile_name"], args["profiles"], group, groups, hosts)
            except MultinodeError as exc:
                result.update(failed=True, msg=str(exc) + _also_found(args["deferred"]))
                return result
            result["node_facts"] = facts
            if facts["llm_server_nnodes"] > 1:
                node = {"node_rank": facts["llm_server_node_rank"],
                        "dist_init_addr": facts["llm_server_dist_init_addr"],
                        "node_gpu_counts": facts["llm_server_node_gpu_counts"]}
                args.update(node)
                module_args.update(node)

        if args["host_checks"] and args["profile_checks"]:
            answer = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
            result.update(answer)
            return result

        # Read nothing on the controller that belongs to the host: no config.json, disk or RAM here.
        out, warnings, failure = run(dict(args, host_checks=False))
        if out.get("deferred"):
            failure = self._unreachable(out)
        result.update(out)
        if warnings:
            result["warnings"] = warnings
        if failure:
            result.update(failed=True, msg=failure)
        return remove_values(result, no_log_values)
