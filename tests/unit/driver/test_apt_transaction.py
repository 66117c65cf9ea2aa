"""Parsers of gpufleet.llm_server.apt_transaction, fed with real apt/dpkg output.

The transcripts in data/ were captured from apt 2.6 and dpkg 1.21 (Debian 12) run against the stand-in
repositories of tests/support/apt_repos (the role's Molecule scenario runs the module end to end against real apt).
"""

import pathlib

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import apt_transaction as at

DATA = pathlib.Path(__file__).parent / "data"


def text(name):
    return (DATA / name).read_text()


def test_policy_candidate_installed_and_every_version():
    policy = at.parse_policy(text("apt-cache-policy.txt"))
    assert policy["nvidia-headless-595-open"] == {
        "installed": None, "candidate": "595.84-0ubuntu0.24.04.1",
        "versions": ["595.84-0ubuntu0.24.04.1", "595.71.05-0ubuntu0.24.04.1"]}
    installed = policy["nvidia-dkms-580-open"]
    assert installed["installed"] == installed["candidate"] == "580.173.02-0ubuntu0.24.04.1"
    # the installed version's line starts with " *** "; the repository priorities are not versions
    assert installed["versions"] == ["580.173.02-0ubuntu0.24.04.1", "580.159.04-1ubuntu1", "580.159.03-1ubuntu1",
                                     "580.159.03-0ubuntu0.24.04.1"]


def test_policy_unknown_and_virtual_names_have_no_candidate():
    policy = at.parse_policy(text("apt-cache-policy.txt"))
    assert "nvidia-no-such-package" not in policy
    assert policy["nvidia-dkms-kernel"] == {"installed": None, "candidate": None, "versions": []}


def test_simulation_installs_and_removes_with_versions():
    ops = at.parse_simulation(text("apt-get-simulate-switch.txt"))
    installs = {op["name"]: op for op in ops if op["op"] == "install"}
    removes = {op["name"]: op for op in ops if op["op"] == "remove"}
    assert installs["nvidia-dkms-595-open"]["version"] == "595.84-0ubuntu0.24.04.1"
    assert installs["nvidia-dkms-595-open"]["previous"] is None
    assert removes["nvidia-dkms-580-open"]["version"] == "580.173.02-0ubuntu0.24.04.1"
    # removed because of Conflicts (nvidia-kernel-common), not asked for
    assert "nvidia-kernel-common-580" in removes
    assert not set(installs) & set(removes)


def test_depends_closure_follows_the_transitional_package():
    closure = at.parse_depends_closure(text("apt-cache-depends-590.txt"))
    # nvidia-headless-590-open is an empty package depending on the 595 one, which pulls the real driver
    assert {"nvidia-headless-590-open", "nvidia-headless-595-open", "nvidia-dkms-595-open",
            "nvidia-kernel-common-595", "dkms"} <= closure
    assert not any(name.startswith("<") for name in closure)


def test_dpkg_status_installed_and_held():
    installed, held = at.parse_dpkg_status(text("dpkg-status.txt"))
    assert installed["dkms"] == "3.0.10-8+deb12u1"
    assert "nvidia-kernel-common-580" in held and "dkms" not in held


def test_search_lists_real_names():
    names = at.parse_search(text("apt-cache-search.txt"))
    assert "nvidia-headless-595-open" in names and names == sorted(names)


@pytest.mark.parametrize("versions, want", [
    ({"nvidia-dkms-590-open": "590.48.01-0ubuntu0.24.04.5", "nvidia-dkms-595-open": "595.84-0ubuntu0.24.04.1"}, "595.84"),
    ({"libnvidia-compute": "590.48.01-1ubuntu1", "nvidia-driver-pinning-590": "590-1ubuntu1"}, "590.48.01"),
    ({"nvidia-kernel-open-dkms": "595.71.05-1", "dkms": "3.0.10-8+deb12u1", "nvlsm": "2025.10.14-1"}, "595.71.05"),
    ({"linux-modules-nvidia-595-open-generic": "6.8.0-146.146+2"}, ""),
    ({"nvidia-dkms-580-open": "580.159.04-1ubuntu1", "nvidia-utils-580": "580.173.02-0ubuntu0.24.04.1"}, "580.173.02"),
])
def test_driver_version_is_the_highest_nvidia_driver_version(versions, want):
    assert at.driver_version(versions, r"^(lib)?nvidia-") == want


def test_expand_patterns_is_fnmatch_on_installed_names():
    names = ["nvidia-dkms-580-open", "nvidia-driver-pinning-590", "nvidia-container-toolkit", "libnvidia-compute-580"]
    assert at.expand_patterns(["*nvidia*-580", "*nvidia*-580-open", "nvidia-driver-pinning-*"], names) == [
        "libnvidia-compute-580", "nvidia-dkms-580-open", "nvidia-driver-pinning-590"]


# -- mixed_stack (issue 33): versions from the mirrored indexes (tests/support/apt_repos/indexes.yml) -------------
@pytest.mark.parametrize(("stack", "mixed"), [
    # One Canonical build, the pinning package and a precompiled module package do not count as versions.
    ({"nvidia-dkms-580-open": "580.159.03-0ubuntu0.24.04.1", "nvidia-firmware-580-580.159.03": "580.159.03-0ubuntu0.24.04.1",
      "linux-modules-nvidia-580-open-generic": "6.8.0-146.146+2"}, False),
    ({"nvidia-dkms-open": "595.71.05-1ubuntu1", "nvidia-driver-pinning-595": "595-1ubuntu1"}, False),
    # A point release half applied.
    ({"nvidia-headless-580-open": "580.159.03-0ubuntu0.24.04.1", "nvidia-dkms-580-open": "580.173.02-0ubuntu0.24.04.1"}, True),
    # Ubuntu's transitional 590 names with the 595 packages they depend on: one driver (595.84).
    ({"nvidia-utils-590": "590.48.01-0ubuntu0.24.04.5", "nvidia-utils-595": "595.84-0ubuntu0.24.04.1"}, False),
    # The real 590 (.4) beside a transitional one (.5) and 595: mixed, although both say 590.48.01.
    ({"nvidia-dkms-590-open": "590.48.01-0ubuntu0.24.04.4", "nvidia-utils-590": "590.48.01-0ubuntu0.24.04.5",
      "nvidia-utils-595": "595.84-0ubuntu0.24.04.1"}, True),
    # Unsuffixed names of two branches (NVIDIA's repository): mixed.
    ({"nvidia-dkms-open": "590.48.01-1ubuntu1", "libnvidia-compute": "595.71.05-1ubuntu1"}, True),
])
def test_mixed_stack(stack, mixed):
    groups = at.mixed_stack(stack)
    assert bool(groups) is mixed
    if mixed:
        assert sorted(name for names in groups.values() for name in names) == sorted(
            name for name, version in stack.items() if at.driver_version_key(version))
        assert at.describe_mixed(groups).count(" at ") == len(groups)


def test_the_keep_closure_follows_the_installed_versions(tmp_path):
    """The 580.159.03 host of the mirrored archive (indexes.yml [U], dpkg status built by dpkg_fixtures from it): its
    installed nvidia-kernel-common-580 needs nvidia-firmware-580-580.159.03, whatever 580.173.02 depends on; a stack
    that only Provides a requested name (libnvidia-compute-580 provides libnvidia-compute) is no root."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    import dpkg_fixtures as fx

    version = "580.159.03-0ubuntu0.24.04.1"
    names = ["nvidia-headless-580-open", "nvidia-headless-no-dkms-580-open", "nvidia-dkms-580-open", "nvidia-kernel-common-580",
             "nvidia-kernel-source-580-open", "libnvidia-compute-580", "nvidia-compute-utils-580", "libnvidia-cfg1-580",
             "nvidia-utils-580", "nvidia-firmware-580-580.159.03"]
    status = tmp_path / "status"
    status.write_text(fx.status_text("ubuntu-noble", [(name, version) for name in names]))
    keep = at.AptTransaction(None, str(tmp_path), ["nvidia-headless-580-open", "nvidia-utils-580"], dpkg_status=str(status))
    assert set(names) <= keep._installed_closure(keep.install)
    other = at.AptTransaction(None, str(tmp_path), ["libnvidia-compute", "nvidia-dkms-open"], dpkg_status=str(status))
    assert other._installed_closure(other.install) == set()


def _real_run(argv, environ_update=None, cwd=None):
    """The module's run_command, for this machine's real apt (read-only calls only)."""
    import os
    import subprocess

    proc = subprocess.run(argv, env=dict(os.environ, **(environ_update or {})), cwd=cwd, capture_output=True,
                          text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _plan_of(tmp_path, name, seed):
    workdir = tmp_path / name
    workdir.mkdir()
    transaction = at.AptTransaction(_real_run, str(workdir), ["hello"], system_srcpkgcache=str(seed))
    plan = transaction.plan()
    plan.pop("commands")
    return plan, workdir


def test_a_plan_reads_apt_through_its_own_caches_and_trusts_no_copy(tmp_path):
    """Real apt of this machine (Debian 12 on the development and CI machines; `hello` is in Debian's main archive).
    Before 2026-12-06 a plan ran apt without any binary cache, so each of its four to six apt calls parsed every list
    file again (0.54 s against 0.11 s per call in a Debian 12 container). Now the plan's caches live in its work
    directory, seeded from the system's source cache: the plan must be the same from a good seed, from a corrupt
    (stale) one and from none, and the seed must not be written."""
    import hashlib
    import shutil as sh
    import subprocess

    if sh.which("apt-get") is None:
        pytest.fail("apt-get is missing: these tests run on Debian (the development and CI machines)")
    good_seed = tmp_path / "system-srcpkgcache.bin"
    subprocess.run(["apt-cache", "-o", f"Dir::Cache::srcpkgcache={good_seed}",
                    "-o", f"Dir::Cache::pkgcache={tmp_path / 'system-pkgcache.bin'}", "stats"],
                   check=True, capture_output=True)
    assert good_seed.stat().st_size > 0
    digest_before = hashlib.sha256(good_seed.read_bytes()).hexdigest()
    corrupt_seed = tmp_path / "corrupt-srcpkgcache.bin"
    corrupt_seed.write_bytes(good_seed.read_bytes()[: good_seed.stat().st_size // 3])

    seeded, seeded_dir = _plan_of(tmp_path, "seeded", good_seed)
    corrupt, corrupt_dir = _plan_of(tmp_path, "corrupt", corrupt_seed)
    unseeded, unseeded_dir = _plan_of(tmp_path, "unseeded", tmp_path / "no-such-cache.bin")

    assert seeded["missing"] == [] and [op["name"] for op in seeded["installed"]] == ["hello"], seeded
    assert seeded == corrupt == unseeded
    assert hashlib.sha256(good_seed.read_bytes()).hexdigest() == digest_before
    for workdir in (seeded_dir, corrupt_dir, unseeded_dir):  # apt wrote its caches where the plan told it
        assert (workdir / "pkgcache.bin").stat().st_size > 0
    # the corrupt copy was rebuilt, not used
    assert (corrupt_dir / "srcpkgcache.bin").stat().st_size == (unseeded_dir / "srcpkgcache.bin").stat().st_size
