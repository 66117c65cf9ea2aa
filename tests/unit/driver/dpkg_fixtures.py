"""dpkg status databases (/var/lib/dpkg/status format) of hosts with NVIDIA driver stacks installed.

TEST DOUBLE, built from recorded reality, independently of the code under test: the package names,
versions and Depends/Pre-Depends/Provides of every NVIDIA package are those of the mirrored indexes
(tests/support/apt_repos/indexes.yml, recorded from Ubuntu's archive and NVIDIA's repositories, sources
cited there; expanded by tests/support/apt_repos/build_repo.stanzas, the same expansion that builds the
stand-in repositories molecule nvidia_driver installs from). Which packages each host has installed
comes from a recorded installed set (named at each fixture in test_nvidia_driver_rules.py), not from a
closure computed here. The non-NVIDIA packages (dkms, adduser, ocl-icd-libopencl1, libc6) are only there
as dependency targets; no decision reads their versions (dkms and libc6 carry those of the recorded
data/dpkg-status.txt, the others are placeholders).

Molecule's own dpkg status (the stand-in packages really installed by dpkg) could not be captured in the
session that wrote this (no molecule run allowed then); the next molecule nvidia_driver run should add one.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
if str(ROOT / "tests" / "support" / "apt_repos") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "support" / "apt_repos"))

import yaml  # noqa: E402
from build_repo import load_data, stanzas  # noqa: E402

MIRROR = load_data(ROOT / "tests" / "support" / "apt_repos" / "indexes.yml")
# The role's own package data and driver-version regex (roles/nvidia_driver/vars/main.yml).
VARS = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text())
DATA = VARS["__nvidia_driver_package_data"]
VERSION_FROM = VARS["__nvidia_driver_version_from"]
RECORDED = pathlib.Path(__file__).parent / "data" / "dpkg-status.txt"
OTHERS = {"dkms": "3.0.10-8+deb12u1", "libc6": "2.36-9+deb12u14", "adduser": "3.134", "ocl-icd-libopencl1": "2.3.1-1"}
STATUS_WORDS = {"ii": "install ok installed", "hi": "hold ok installed", "iU": "install ok unpacked",
                "iF": "install ok half-configured", "rc": "deinstall ok config-files"}


def recorded_ubuntu_580():
    """(installed [(name, version)], held) of the NVIDIA packages in data/dpkg-status.txt: dpkg-query's answer on
    the molecule nvidia_driver host after the role installed Ubuntu's 580 open compute stack (stand-in repository)."""
    installed, held = [], set()
    for line in RECORDED.read_text().splitlines():
        status, name, version = line.split("\t")
        if "nvidia" in name:
            installed.append((name, version))
            if status.startswith("h"):
                held.add(name)
    return installed, held


def stanza(repo, name, version):
    for package in stanzas(MIRROR, repo):
        if package["name"] == name and package["version"] == version:
            return package
    raise KeyError("%s %s is not in the mirrored %s" % (name, version, repo))


def status_text(repo, installed, held=(), states=None, others=True):
    """installed: [(name, version)] from the mirrored repo; held: names dpkg holds; states: {name: 'iU'|...}."""
    states = dict(states or {})
    blocks = []
    if others:
        for name, version in OTHERS.items():
            blocks.append("Package: %s\nStatus: install ok installed\nArchitecture: amd64\nVersion: %s\n" % (name, version))
    for name, version in installed:
        package = stanza(repo, name, version)
        code = states.get(name, "hi" if name in held else "ii")
        lines = ["Package: %s" % name, "Status: %s" % STATUS_WORDS[code], "Priority: optional",
                 "Architecture: %s" % package.get("architecture", "amd64"), "Version: %s" % version]
        for key, field in (("provides", "Provides"), ("pre_depends", "Pre-Depends"), ("depends", "Depends")):
            if package.get(key):
                lines.append("%s: %s" % (field, ", ".join(package[key])))
        lines.append("Description: %s\n stand-in stanza from the mirrored index" % name)
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
