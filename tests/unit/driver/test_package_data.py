"""The nvidia_driver role's package data (roles/nvidia_driver/vars/main.yml) against the mirrored indexes.

tests/support/apt_repos/indexes.yml mirrors the real repositories and records what each documentation says to
install; it is written independently of the role. Every package set the role would ask apt for must be the
documented one, every name must exist in the mirrored index, and the lock (hold or NVIDIA's pinning package)
must be the one the repository uses.
"""

import fnmatch
import pathlib
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "support" / "apt_repos"))

from build_repo import load_data, stanzas  # noqa: E402

ROLE = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text())["__nvidia_driver_package_data"]
MIRROR = load_data(ROOT / "tests" / "support" / "apt_repos" / "indexes.yml")
# Role (source, distribution) -> mirrored repository. ubuntu2204 has no mirror (not recorded): not tested here.
REPOS = {("ubuntu", "ubuntu2404"): "ubuntu-noble", ("nvidia", "ubuntu2404"): "nvidia-ubuntu2404",
         ("nvidia", "debian12"): "nvidia-debian12", ("nvidia", "debian13"): "nvidia-debian13"}


def cases():
    for (source, distribution), repo in REPOS.items():
        for branch, entry in ROLE[source][distribution].items():
            for flavor, profiles in entry["packages"].items():
                for profile in profiles:
                    yield pytest.param(source, distribution, repo, branch, flavor, profile,
                                       id="%s-%s-%s-%s-%s" % (source, distribution, branch, flavor, profile))
            for flavor in entry.get("precompiled", {}):
                yield pytest.param(source, distribution, repo, branch, flavor, "precompiled",
                                   id="%s-%s-%s-%s-precompiled" % (source, distribution, branch, flavor))


def role_request(source, distribution, branch, flavor, profile):
    entry = ROLE[source][distribution][branch]
    wanted = entry["precompiled"][flavor] if profile == "precompiled" else entry["packages"][flavor][profile]
    first = [entry["pin_package"]] if entry["lock"] == "pin" else []
    return entry, first, [name.replace("{kernel_flavor}", "generic") for name in wanted]


@pytest.mark.parametrize("source, distribution, repo, branch, flavor, profile", list(cases()))
def test_role_asks_for_the_documented_packages(source, distribution, repo, branch, flavor, profile):
    entry, first, wanted = role_request(source, distribution, branch, flavor, profile)
    documented = MIRROR["documented"][repo][branch][flavor][profile]
    assert (first, wanted) == (documented.get("first", []), documented["then"])
    assert entry["lock"] == ("pin" if documented.get("first") else "hold")
    assert entry.get("transitional_to") == MIRROR["documented"][repo][branch].get("transitional_to")


@pytest.mark.parametrize("source, distribution, repo, branch, flavor, profile", list(cases()))
def test_every_requested_name_is_in_the_mirrored_index(source, distribution, repo, branch, flavor, profile):
    entry, first, wanted = role_request(source, distribution, branch, flavor, profile)
    names = {package["name"] for package in stanzas(MIRROR, repo)}
    assert set(first + wanted) <= names, sorted(set(first + wanted) - names)


@pytest.mark.parametrize("source, distribution", sorted(REPOS))
def test_stack_patterns_cover_the_branch_and_never_another_branch(source, distribution):
    index = stanzas(MIRROR, REPOS[(source, distribution)])
    for branch, entry in ROLE[source][distribution].items():
        mine = {p["name"] for p in index if any(fnmatch.fnmatchcase(p["name"], pat) for pat in entry["stack"])}
        # every package of the branch's own build in the mirror is part of its stack (so leaving it removes it all) ...
        built = {p["name"] for p in index if p.get("branch") == branch and not p["name"].startswith("nvidia-driver-pinning")}
        assert built <= mine, sorted(built - mine)
        # ... and a suffixed stack never claims another branch's suffixed package
        if entry["lock"] == "hold":
            others = {p["name"] for p in index if p.get("branch") not in ("", branch) and p["name"].endswith(
                tuple("-%s%s" % (b, s) for b in ROLE[source][distribution] if b != branch for s in ("", "-open")))}
            assert not mine & others, sorted(mine & others)


def test_every_documented_pair_is_in_the_role_data():
    for (source, distribution), repo in REPOS.items():
        assert sorted(MIRROR["documented"][repo]) == sorted(ROLE[source][distribution]), repo
