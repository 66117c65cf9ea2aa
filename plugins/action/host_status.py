# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action for gpufleet.llm_server.host_status (documentation: plugins/modules/host_status.py).

playbooks/status.yml runs none of the roles, so their defaults are not in the play. This action works out
what the inventory wants as the roles would see it - each role's defaults/main.yml (and its private
vars/main.yml) below the task's variables, templated in the host's context, as role_inputs does - fills
the module's options that the task leaves out, and runs the module once on the host. The result carries
`wanted` (the values used), for the report on the controller.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.llm_server.plugins.plugin_utils.role_vars import role_variables

MODULE = "gpufleet.llm_server.host_status"

# option -> (role, variable) whose value the inventory (or the role's default) gives it.
FROM_ROLES = {
    "cuda_version": ("cuda_toolkit", "cuda_toolkit_version"),
    "build_dir": ("sglang_build", "sglang_build_dir"),
    "ref": ("sglang_build", "sglang_build_ref"),
    "git_url": ("sglang_build", "sglang_build_git_url"),
    "python": ("sglang_build", "sglang_build_python"),
    "patches": ("sglang_sm120_patch", "sglang_sm120_patch_patches"),
    "required_keys": ("sglang_sm120_patch", "sglang_sm120_patch_required_keys"),
    "unit_dir": ("sglang_service", "sglang_service_unit_dir"),
    "unit_name": ("sglang_service", "sglang_service_unit_name"),
    "known_good_dir": ("sglang_service", "sglang_service_known_good_dir"),
    "restart_marker": ("sglang_service", "sglang_service_restart_marker"),
    "env_file": ("sglang_service", "sglang_service_env_file"),
    "credential_encrypt": ("sglang_service", "sglang_service_credential_encrypt"),
    "model_record_dir": ("model_download", "model_download_record_dir"),
}
DRIVER = {"branch": "nvidia_driver_branch", "version": "nvidia_driver_version", "flavor": "nvidia_driver_flavor",
          "hold": "nvidia_driver_hold"}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _role_vars(self, role, task_vars, cache):
        if role not in cache:
            cache[role] = role_variables(self._loader, self._templar, role, task_vars)
        return cache[role]

    def _wanted(self, role, name, task_vars, cache):
        variables, templar = self._role_vars(role, task_vars, cache)
        if name not in variables:
            return None
        try:
            return templar.template(variables[name])
        except AnsibleError as exc:
            raise AnsibleError("host_status: %s (role %s) cannot be templated for this host: %s. Fix the inventory "
                               "value of %s, or pass the module option explicitly." % (name, role, exc.message, name))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        cache = {}
        try:
            for option, (role, name) in FROM_ROLES.items():
                if option not in args:
                    value = self._wanted(role, name, task_vars, cache)
                    if value is not None:
                        args[option] = value
            if "driver" not in args:
                args["driver"] = {key: self._wanted("nvidia_driver", name, task_vars, cache) for key, name in DRIVER.items()}
                args["driver"]["branch"] = str(args["driver"]["branch"]) if args["driver"]["branch"] is not None else None
            profile = self._wanted("sglang_service", "sglang_service_profile_name", task_vars, cache)
            profiles = self._wanted("sglang_service", "sglang_service_profiles", task_vars, cache) or {}
            state_dir = self._wanted("sglang_service", "sglang_service_state_dir", task_vars, cache)
            driver_state_dir = self._wanted("nvidia_driver", "nvidia_driver_state_dir", task_vars, cache)
            # what cuda_toolkit exports for the unit's environment (its vars/main.yml), for the rendering in status.yml
            cuda_env = self._wanted("cuda_toolkit", "__cuda_toolkit_env", task_vars, cache)
        except AnsibleError as exc:
            result.update(failed=True, msg=str(exc.message if hasattr(exc, "message") else exc))
            return result
        if "model_path" not in args:
            args["model_path"] = str((profiles.get(profile) or {}).get("model_path") or "")
        if "deployment_record" not in args:
            args["deployment_record"] = "%s/deployment-%s.json" % (state_dir, profile)
        # sglang_service's record of its last real start (tasks/record_ready.yml), nvidia_driver's of its last reboot
        if "start_record" not in args and state_dir:
            args["start_record"] = "%s/start-to-ready.json" % state_dir
        if "reboot_record" not in args and driver_state_dir:
            args["reboot_record"] = "%s/reboot.json" % driver_state_dir
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        result["wanted"] = {"profile": profile, "ref": args.get("ref"), "driver": args.get("driver"),
                            "cuda_version": args.get("cuda_version"), "unit_name": args.get("unit_name"),
                            "model_path": args.get("model_path"), "cuda_toolkit_env": cuda_env}
        return result
