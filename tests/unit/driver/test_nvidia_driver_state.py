"""module_utils/nvidia_driver_state.read_state against a host tree in tmp_path.

Real parts: files, modes and owners are real files under tmp_path (HostIO's root prefix), compared as
the template module would. TEST DOUBLES: the dpkg database is dpkg_fixtures' recorded Ubuntu 580 host
(dpkg_fixtures.py says where it comes from); `systemctl show`, `nvidia-smi` and
`dpkg-query -S` answers are given by a fake `run`, in the format those tools print (systemd 252's
`show -p` lines; nvidia-smi's csv,noheader query output; dpkg-query -S "package: path").
"""

import getpass
import json
import grp
import os
import pathlib
import sys

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import nvidia_driver_rules as rules
from ansible_collections.gpufleet.llm_server.plugins.module_utils.nvidia_driver_state import HostIO, read_state

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import dpkg_fixtures as fx  # noqa: E402
from dpkg_fixtures import DATA, VERSION_FROM, recorded_ubuntu_580  # noqa: E402

OWNER, GROUP = getpass.getuser(), grp.getgrgid(os.getgid()).gr_name
OPTIONS = "/etc/modprobe.d/gpufleet-nvidia.conf"
BLACKLIST = "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"


def tree(tmp_path, persistenced="enabled", active="active"):
    installed, held = recorded_ubuntu_580()
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(fx.status_text("ubuntu-noble", installed, held=held))
    (tmp_path / "etc/modprobe.d").mkdir(parents=True)
    (tmp_path / "etc/apt/preferences.d").mkdir(parents=True)
    (tmp_path / "var/lib/apt/lists").mkdir(parents=True)
    (tmp_path / "var/lib/apt/lists/archive_dists_noble_restricted_binary-amd64_Packages").write_text("Package: x\n")
    (tmp_path / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (tmp_path / ("." + BLACKLIST)).write_text("blacklist nouveau\n")
    (tmp_path / ("." + BLACKLIST)).chmod(0o644)
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[0] == "systemctl":
            return 0, "ActiveState=%s\nUnitFileState=%s\n" % (active, persistenced), ""
        return None

    return HostIO(run, root=str(tmp_path)), calls


def params(**overrides):
    base = dict(mode="state", package_data=DATA, source="ubuntu", distribution="ubuntu2404", branch="580", flavor="open",
                profile="compute", kernel_modules="dkms", kernel_flavor="", kernel_release="6.8.0-146-generic",
                distribution_version="24.04", version="", upgrade=False, hold=True, version_from=VERSION_FROM,
                version_pin_prefix="nvidia-driver-pinning-", preferences={"gpufleet-nvidia-driver-version": ""},
                preferences_dir="/etc/apt/preferences.d", agreed_index_signature=None, keep_record=None,
                apt_packages=[], apt_driver_version="",
                files=[{"path": BLACKLIST, "content": "blacklist nouveau\n", "mode": "0644", "owner": OWNER, "group": GROUP},
                       {"path": OPTIONS, "content": None, "mode": None, "owner": None, "group": None}],
                directories=[{"path": "/etc/modprobe.d", "mode": None, "owner": OWNER, "group": None}],
                repository_files=[], keyring=None, repo_key_fingerprints=[], repo_key_min_validity_days=30, repo_url="",
                repo_sources_file=None, allow_proprietary=False, mok_key="", mok_certificate="", headers_package="",
                options_file=OPTIONS, persistenced=True, kernel_module_steps=True,
                secure_boot="auto", controller_machine_id="", connection="ssh", inventory_hostname="gpu1",
                ansible_host="10.0.0.5", gpu_info={"modules_loaded": {"nvidia": True}, "driver_version": "580.173.02",
                                                   "module_flavor": "open"},
                installed_version=None, expected_gpu_count=0)
    base.update(overrides)
    return base


def test_a_converged_host_needs_nothing(tmp_path):
    io, calls = tree(tmp_path)
    result = read_state(params(), io)
    assert result["needs"] == {"packages": False, "holds": False, "files": [], "directories": [], "repository": False,
                               "persistenced": False, "headers": False}
    assert result["keep"]["plan"] == "keep" and result["keep"]["driver_version"] == "580.173.02"
    assert result["reboot_reasons"] == []
    assert result["is_control_node"] is False and result["secure_boot_on"] is False
    assert result["wanted"] == ["nvidia-headless-580-open", "nvidia-utils-580"]
    assert {"kind": "file", "name": BLACKLIST} in result["resources"]
    # one process only: systemctl; dpkg, files, apt lists and machine id are read directly
    assert [argv[0] for argv in calls] == ["systemctl"]


def test_drift_is_found_and_said(tmp_path):
    io = tree(tmp_path, persistenced="disabled", active="inactive")[0]
    (tmp_path / ("." + BLACKLIST)).chmod(0o600)
    (tmp_path / ("." + OPTIONS)).write_text("options nvidia NVreg_X=1\n")
    (tmp_path / "etc/apt/preferences.d/gpufleet-nvidia-driver-version").write_text("Package: x\n")
    result = read_state(params(repository_files=[BLACKLIST], keyring="/etc/apt/keyrings/none.asc",
                               headers_package="linux-headers-6.8.0-146-generic"), io)
    assert result["needs"]["headers"] and result["reasons"]["headers"] == ["not installed: linux-headers-6.8.0-146-generic"]
    assert result["needs"]["files"] == [BLACKLIST, OPTIONS]
    assert result["reasons"]["files"] == {BLACKLIST: ["mode 0600, wanted 0644"], OPTIONS: ["present, wanted absent"]}
    # the keyring's reason is the role's download reason (this fake run has no gpg; test_nvidia_driver_keyring runs it)
    assert result["needs"]["repository"] and result["reasons"]["repository"] == [
        BLACKLIST, "gpg is not installed (it reads the keyring and checks a downloaded key)"]
    assert result["reasons"]["persistenced"] == ["nvidia-persistenced is disabled, wanted enabled",
                                                 "nvidia-persistenced is inactive, wanted active"]
    assert result["needs"]["packages"] and result["keep"]["plan"] == rules.PLAN_WITH_APT
    assert result["keep"]["reasons"] == ["apt preference file gpufleet-nvidia-driver-version differs from the planned one"]
    # not kept: the installed version is not known without apt, so only the options say reboot
    assert result["reboot_reasons"] == ["the kernel module options changed"]


def test_control_node_secure_boot_and_index_signature(tmp_path):
    io = tree(tmp_path)[0]
    efivars = tmp_path / "sys/firmware/efi/efivars"
    efivars.mkdir(parents=True)
    (efivars / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(b"\x06\x00\x00\x00\x01")
    first = read_state(params(controller_machine_id="0123456789abcdef0123456789abcdef"), io)
    assert first["is_control_node"] is True and first["secure_boot_on"] is True
    again = read_state(params(agreed_index_signature=first["index_signature"]), io)
    assert again["keep"]["keep"] is True
    (tmp_path / "var/lib/apt/lists/archive_dists_noble-updates_restricted_binary-amd64_Packages").write_text("Package: y\n")
    changed = read_state(params(agreed_index_signature=first["index_signature"]), io)
    assert changed["keep"]["reasons"] == ["the apt indexes changed since an apt plan last agreed"]


def test_unknown_branch_is_refused_with_the_role_words(tmp_path):
    io = tree(tmp_path)[0]
    with pytest.raises(rules.RulesError, match='nvidia_driver_branch "600"'):
        read_state(params(branch="600"), io)


def test_verify_mode_asks_nvidia_smi_and_dpkg(tmp_path):
    answers = {
        "nvidia-smi": (0, "00000000:01:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 580.173.02\n", ""),
        "dpkg-query -S": (0, "nvidia-utils-580: /usr/bin/nvidia-smi\n", ""),
        "dpkg-query -W": (0, "580.173.02-0ubuntu0.24.04.1", ""),
    }

    def run(argv):
        key = argv[0] if argv[0] == "nvidia-smi" else " ".join(argv[:2])
        return answers[key]

    info = {"modules_loaded": {"nvidia": True}, "driver_version": "580.173.02", "module_flavor": "open", "diagnosis": [],
            "kernel_log_source": "dmesg", "pci_gpu_count": 1, "devices": [{"kind": "gpu", "driver": "nvidia"}]}
    result = read_state(params(mode="verify", gpu_info=info), HostIO(run))
    checks = {c["check"]: c for c in result["verification"]}
    assert result["failed"] == ""
    assert checks["installed_version"]["detail"] == (
        "loaded 580.173.02, installed 580.173.02 (nvidia-utils-580 580.173.02-0ubuntu0.24.04.1)")
    assert checks["gpu_count"]["status"] == "pass"
    missing = read_state(params(mode="verify", gpu_info=info), HostIO(lambda argv: None))
    assert "[gpu_count] nvidia-smi failed (rc n/a)" in missing["failed"]


def test_the_keep_record_round_trip(tmp_path):
    """record mode stores what the state mode then accepts; any index or request change sends the role to apt."""
    io = tree(tmp_path)[0]
    record_path = "/var/lib/gpufleet/nvidia-driver-keep.json"
    without = read_state(params(keep_record=record_path), io)
    assert without["keep"]["keep"] is True and without["fast_keep"] is False and without["needs"]["packages"] is True
    assert without["keep"]["record_reasons"][0].startswith("no stored apt judgement")

    stored = read_state(params(mode="record", keep_record=record_path, apt_packages=without["keep"]["packages"],
                               apt_driver_version=without["keep"]["driver_version"]), io)
    assert stored["record_reasons"] == [] and stored["record"]["index_signature"] == without["index_signature"]
    (tmp_path / "var/lib/gpufleet").mkdir(parents=True)
    (tmp_path / ("." + record_path)).write_text(json.dumps(stored["record"]))
    kept = read_state(params(keep_record=record_path), io)
    assert kept["fast_keep"] is True and kept["needs"]["packages"] is False and kept["keep"]["record_reasons"] == []
    assert {"kind": "file", "name": record_path} in kept["resources"]

    assert read_state(params(keep_record=record_path, upgrade=True), io)["fast_keep"] is False
    assert read_state(params(keep_record=record_path, hold=False), io)["fast_keep"] is True  # holds are not apt's business
    (tmp_path / "etc/apt/preferences.d/cuda-pin").write_text("Package: *\nPin: origin x\nPin-Priority: 100\n")
    pinned = read_state(params(keep_record=record_path), io)
    assert pinned["fast_keep"] is False
    assert pinned["keep"]["record_reasons"] == ["the apt indexes, sources or preferences changed since apt last agreed"]


def test_record_mode_refuses_a_stack_apt_did_not_leave(tmp_path):
    io = tree(tmp_path)[0]
    state = read_state(params(), io)
    extra = state["keep"]["packages"] + [{"name": "nvidia-modprobe", "version": "580.173.02-0ubuntu0.24.04.1"}]
    refused = read_state(params(mode="record", keep_record="/k.json", apt_packages=extra,
                                apt_driver_version=state["keep"]["driver_version"]), io)
    assert refused["record"] is None and refused["record_reasons"][0].startswith("dpkg's closure gives the stack")
