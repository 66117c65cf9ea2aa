"""The test harness's start-up hook: Ansible module payloads compiled once per content in the playbooks the tests
run on this machine (gpufleet_ansiballz_code_cache.py says what and why).

tests/support/ansible_harness.py puts this directory first on PYTHONPATH of the ansible-playbook runs it starts, so
every Python those runs start (the modules, and whatever the roles run) imports this file instead of the
interpreter's own sitecustomize, which is then run too (Debian's installs apport's hook): nothing that Python did
at start-up before is lost.
"""

import importlib.machinery
import importlib.util
import os
import sys

import gpufleet_ansiballz_code_cache

gpufleet_ansiballz_code_cache.install()


def _run_the_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_run_the_shadowed_sitecustomize()
