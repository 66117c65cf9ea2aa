"""package_state against the module it guards: ansible.builtin.apt state=present, in check mode, on this machine.

Real parts: this machine's dpkg database and apt indexes, the real ansible.builtin.apt module (check mode: it
installs nothing) and the real package_state module, run by ansible-playbook on localhost. The claim tested is
the one the roles rely on: whenever package_state says a request is installed, the apt task would report ok
(nothing to do); whatever it reports missing, the apt task runs as before (and here would install, or fail as
it would without the guard).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from support.ansible_harness import run_playbook
from support.requires import require_for_module

QUIET = {"ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}

require_for_module(not (shutil.which("dpkg-query") and shutil.which("apt-cache") and os.path.isdir("/var/lib/apt/lists")),
                   "a Debian machine with apt indexes")


def _query(*fmt):
    return subprocess.run(["dpkg-query", "-W", "-f", "\t".join(fmt) + "\n", "dpkg"], capture_output=True, text=True,
                          check=True).stdout.strip().split("\t")


def _not_installed_candidate():
    """A package apt can install that dpkg does not have (from this machine's indexes), or None."""
    for name in ("cowsay", "sl", "hello", "figlet"):
        policy = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True, check=False,
                                env=dict(os.environ, LC_ALL="C")).stdout
        if "Installed: (none)" in policy and "Candidate: (none)" not in policy and "Candidate:" in policy:
            return name
    return None


def test_installed_means_apt_would_do_nothing(tmp_path):
    version, arch = _query("${Version}", "${Architecture}")
    requests = ["dpkg", "gpg", "dpkg=" + version, "dpkg:" + arch, "dpkg=0.0-not-this", "libc6:" + arch]
    candidate = _not_installed_candidate()
    if candidate:
        requests.append(candidate)
    play = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Ask dpkg
      gpufleet.llm_server.package_state:
        names: "{{ requests }}"
      register: state
    - name: Ask apt, one request at a time (check mode)
      ansible.builtin.apt:
        name: "{{ item }}"
        state: present
        install_recommends: false
      loop: "{{ requests }}"
      check_mode: true
      register: apt_answer
      # A version apt does not have fails the module: that is "apt would not leave it alone" too, so a failure
      # reads as changed and the loop goes on to the next request.
      changed_when: apt_answer.changed | default(false) or apt_answer.failed | default(false)
      failed_when: false
"""
    run = run_playbook(tmp_path, play, env=QUIET,
                       args=("-e", json.dumps({"requests": requests, "ansible_python_interpreter": sys.executable})))
    out = run.output
    assert out, run.stdout[-2000:] + run.stderr[-2000:]
    state = out["plays"][0]["tasks"][0]["hosts"]["localhost"]
    apt = {item["item"]: item for item in out["plays"][0]["tasks"][1]["hosts"]["localhost"]["results"]}
    assert set(state["missing"]) | set(state["installed"]) == set(requests)
    for request in requests:
        apt_does_nothing = not apt[request].get("failed") and not apt[request].get("changed")
        why = (request, state["reasons"].get(request), apt[request].get("msg"))
        assert (request in state["installed"]) == apt_does_nothing, why
    assert "dpkg=0.0-not-this" in state["missing"] and "gpg" in state["installed"]
    if candidate:
        assert candidate in state["missing"] and apt[candidate]["changed"]
