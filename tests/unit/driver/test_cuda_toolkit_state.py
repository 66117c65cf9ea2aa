"""module_utils/cuda_toolkit_state: the cuda_toolkit role's decisions from one read.

Real parts: the real update-alternatives registers a `cuda` alternative in a temporary admin and alternatives
directory (--admindir, --altdir), as NVIDIA's cuda-toolkit-*-config-common postinst does on a host, and the
module reads what dpkg's tool wrote; this machine's real dpkg status database answers for the packages; the
profile script is compared with real files. The only double is nvcc (no CUDA here): a script printing the
`--version` format of the stand-in repository's toolkit (tests/support/apt_repos/build_repo.py, modelled on
NVIDIA's nvcc 13.0 output).
"""

import getpass
import grp
import os
import pathlib
import shutil
import subprocess

from support.requires import requires

from ansible_collections.gpufleet.llm_server.plugins.module_utils import cuda_toolkit_state as cts

needs_tools = requires(not shutil.which("update-alternatives") or not pathlib.Path("/var/lib/dpkg/status").is_file(),
                       "update-alternatives and a dpkg database")
NVCC = ("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
        "echo 'Built on Wed_Aug_20_01:58:59_PM_PDT_2025'\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n"
        "echo 'Build cuda_13.0.r13.0/compiler.36424714_0'\n")
PROFILE = "# Ansible managed\nexport CUDA_HOME=\"/usr/local/cuda-13.0\"\n"


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _tree(tmp_path, nvcc=True):
    home = tmp_path / "usr/local/cuda-13.0"
    (home / "bin").mkdir(parents=True)
    if nvcc:
        (home / "bin/nvcc").write_text(NVCC)
        (home / "bin/nvcc").chmod(0o755)
    profile = tmp_path / "etc/profile.d/gpufleet-cuda.sh"
    profile.parent.mkdir(parents=True)
    profile.write_text(PROFILE)
    profile.chmod(0o644)
    spec = {"path": str(profile), "content": PROFILE, "mode": "0644", "owner": getpass.getuser(),
            "group": grp.getgrgid(os.getgid()).gr_name}
    return home, tmp_path / "usr/local/cuda", spec


def _register(tmp_path, link, *choices):
    admin, alt = tmp_path / "var/lib/dpkg/alternatives", tmp_path / "etc/alternatives"
    admin.mkdir(parents=True, exist_ok=True)
    alt.mkdir(parents=True, exist_ok=True)
    for priority, path in enumerate(choices, start=100):
        subprocess.run(["update-alternatives", "--admindir", str(admin), "--altdir", str(alt), "--install", str(link),
                        "cuda", str(path), str(priority)], check=True, capture_output=True)
    return admin, alt


@needs_tools
def test_a_converged_host_needs_nothing(tmp_path):
    home, link, spec = _tree(tmp_path)
    _register(tmp_path, link, home)
    result = cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))
    assert result["needs"] == {"packages": False, "alternative": False, "link": False, "profile": False}
    assert result["alternative"] == {"registered": True, "value": str(home)}
    assert result["nvcc"]["rc"] == 0 and result["nvcc"]["release"] == "13.0"
    assert str(tmp_path / "etc/alternatives/cuda") in result["resources"]


@needs_tools
def test_an_alternative_on_another_toolkit_is_set_back(tmp_path):
    home, link, spec = _tree(tmp_path)
    other = tmp_path / "usr/local/cuda-12.9"
    other.mkdir(parents=True)
    admin, alt = _register(tmp_path, link, home, other)  # the higher priority (12.9) wins in auto mode
    assert os.readlink(alt / "cuda") == str(other)
    result = cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))
    assert result["needs"]["alternative"] is True and result["needs"]["link"] is False
    subprocess.run(["update-alternatives", "--admindir", str(admin), "--altdir", str(alt), "--set", "cuda", str(home)],
                   check=True, capture_output=True)
    assert cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))["needs"]["alternative"] is False


@needs_tools
def test_without_an_alternative_the_link_is_judged(tmp_path):
    home, link, spec = _tree(tmp_path)
    result = cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))
    assert result["alternative"]["registered"] is False
    assert result["needs"]["link"] is True and result["reasons"]["link"] == ["no link"]
    link.symlink_to(tmp_path / "usr/local/cuda-12.9")
    assert cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))["needs"]["link"] is True
    link.unlink()
    link.symlink_to(home)
    result = cts.read(["dpkg"], str(home), str(link), spec, _run, root=str(tmp_path))
    assert result["needs"]["link"] is False and str(link) in result["resources"]


@needs_tools
def test_missing_packages_profile_and_nvcc(tmp_path):
    home, link, spec = _tree(tmp_path, nvcc=False)
    _register(tmp_path, link, home)
    pathlib.Path(spec["path"]).chmod(0o600)
    result = cts.read(["dpkg", "gpufleet-no-such-package"], str(home), str(link), dict(spec, content=PROFILE + "#\n"),
                      _run, root=str(tmp_path))
    assert result["missing"] == ["gpufleet-no-such-package"] and "dpkg" in result["installed"]
    assert result["needs"]["packages"] is True
    assert result["needs"]["profile"] is True
    assert result["reasons"]["profile"] == ["content differs", "mode 0600, wanted 0644"]
    assert result["nvcc"]["rc"] == 2 and result["nvcc"]["release"] == "" and "no such file" in result["nvcc"]["stderr"]


def test_nvcc_release_reads_the_release_not_the_build():
    assert cts.nvcc_release(NVCC.replace("echo '", "").replace("'\n", "\n")) == "13.0"
    assert cts.nvcc_release("") == ""
    assert cts.nvcc_release("nvcc: command not found") == ""
