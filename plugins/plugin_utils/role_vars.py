# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A role's variables as the role would see them, for action plugins that run on the controller.

role_variables(loader, templar, role, task_vars) layers the task's variables over the role's private
vars/main.yml (the __ names some defaults read) over its defaults/main.yml - role defaults below everything
else, as Ansible layers them, without copying the task variables - and returns (variables, templar), the
templar bound to those variables. Used by the role_inputs and host_status actions.
"""

from __future__ import annotations

import os
from collections import ChainMap

# plugins/plugin_utils/role_vars.py -> the collection root's roles/
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


def role_file(role, *parts):
    return os.path.join(ROLES_DIR, role, *parts)


def load(loader, path, trusted):
    """The YAML document at path ({} when empty), None when the file does not exist."""
    if not os.path.exists(path):
        return None
    return loader.load_from_file(path, cache="all", trusted_as_template=trusted) or {}


def role_variables(loader, templar, role, task_vars):
    """(ChainMap(task_vars, vars/main.yml, defaults/main.yml), a templar over it) for roles/<role>."""
    private = load(loader, role_file(role, "vars", "main.yml"), trusted=True) or {}
    defaults = load(loader, role_file(role, "defaults", "main.yml"), trusted=True) or {}
    variables = ChainMap(task_vars, private, defaults)
    return variables, templar.copy_with_new_env(available_variables=variables)
