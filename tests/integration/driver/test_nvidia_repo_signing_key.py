"""nvidia_driver: the repository signing key and fingerprint follow the repository's distribution.

NVIDIA signs its debian13 repository with its own key (8793F200.pub) and the Ubuntu and debian12 repositories
with the cudatools key (3bf863cc.pub). A Debian 13 host given the 3bf863cc URL gets a 404, so the defaults
must pick the key per repository. Real ansible-playbook on localhost templating the role's own defaults and
vars; nothing is downloaded (tests talk only to loopback).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK_BIN = pathlib.Path(sys.executable).parent / "ansible-playbook"
ROLE = ROOT / "roles" / "nvidia_driver"

CUDATOOLS = ("3bf863cc.pub", "EB693B3035CD5710E231E123A4B469963BF863CC")
KITMAKER_TRIXIE = ("8793F200.pub", "02182E60104FCDC26EAE1B8597A5D4CB8793F200")


def _render(tmp_path: pathlib.Path, extra_vars: dict) -> dict:
    play = f"""
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {ROLE}/defaults/main.yml
    - {ROLE}/vars/main.yml
  tasks:
    - name: Show the key the role would download and accept
      ansible.builtin.debug:
        msg:
          url: "{{{{ nvidia_driver_repo_key_url }}}}"
          fingerprints: "{{{{ nvidia_driver_repo_key_fingerprints }}}}"
"""
    (tmp_path / "play.yml").write_text(play)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    proc = subprocess.run([str(PLAYBOOK_BIN), str(tmp_path / "play.yml"), "-e", json.dumps(extra_vars)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout[proc.stdout.index("{"):])
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]


@pytest.mark.parametrize(("distro", "key"), [
    ("debian13", KITMAKER_TRIXIE),
    ("debian12", CUDATOOLS),
    ("ubuntu2404", CUDATOOLS),
    ("ubuntu2204", CUDATOOLS),
])
def test_signing_key_follows_the_repository(tmp_path, distro, key):
    shown = _render(tmp_path, {"nvidia_driver_repo_distro": distro, "nvidia_driver_repo_arch": "x86_64"})
    key_file, fingerprint = key
    assert shown["url"] == f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64/{key_file}"
    assert shown["fingerprints"] == [fingerprint]


def test_inventory_key_overrides_stay_in_force(tmp_path):
    shown = _render(tmp_path, {"nvidia_driver_repo_distro": "debian13",
                               "nvidia_driver_repo_key_url": "http://127.0.0.1:30090/key.asc",
                               "nvidia_driver_repo_key_fingerprints": ["AB" * 20]})
    assert shown == {"url": "http://127.0.0.1:30090/key.asc", "fingerprints": ["AB" * 20]}
