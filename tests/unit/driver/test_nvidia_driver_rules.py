"""module_utils/nvidia_driver_rules: the fast keep, reboot reasons and the verification judge.

The dpkg status databases are TEST DOUBLES built by dpkg_fixtures.py from the mirrored indexes
(tests/support/apt_repos/indexes.yml: the real names, versions and relations of Ubuntu's archive and
NVIDIA's repositories, sources cited there; see ../shared/docs/nvidia-packages.md). Which packages are
installed comes from recorded sets, named at each fixture:
  - UBUNTU_580: data/dpkg-status.txt, dpkg-query's answer on the molecule nvidia_driver host after the
    role installed Ubuntu's 580 open compute stack from the stand-in repository;
  - NVIDIA_595: the installed set at 595.71.05-1ubuntu1 recorded from NVIDIA's ubuntu2404 repository
    (indexes.yml [N]); the kernel source package carries the -open name of indexes.yml's rename rule;
  - DEBIAN_590: NVIDIA's debian12 compute install at 590.48.01-1 (indexes.yml [D]: pinning package, then
    nvidia-driver-cuda nvidia-kernel-open-dkms, and what they depend on);
  - UBUNTU_590: Ubuntu's 590 after Canonical's 2026-03-27 transition (indexes.yml [C]): the -590 names at
    590.48.01-0ubuntu0.24.04.5 and the -595 packages at 595.84 they depend on.
What the real apt does with these hosts is what molecule nvidia_driver checks (step_check.yml); those
runs were not possible in the session that wrote these tests, so none of the expectations below was
copied from a run: each follows from apt_transaction's rules, stated at the assertion.
The package data, the version regex and the stack patterns are the role's own (roles/nvidia_driver/vars).
"""

import pathlib
import re
import sys

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs
from ansible_collections.gpufleet.llm_server.plugins.module_utils import nvidia_driver_rules as rules

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import dpkg_fixtures as fx  # noqa: E402
from dpkg_fixtures import DATA, VERSION_FROM, recorded_ubuntu_580  # noqa: E402

UBUNTU_580_V = "580.173.02-0ubuntu0.24.04.1"
NVIDIA_595_V = "595.71.05-1ubuntu1"
NVIDIA_595 = [(name, NVIDIA_595_V) for name in (
    "nvidia-dkms-open", "nvidia-firmware", "nvidia-kernel-common", "nvidia-kernel-source-open", "libnvidia-compute",
    "nvidia-persistenced", "nvidia-modprobe")] + [("nvidia-driver-pinning-595", "595-1ubuntu1")]
DEBIAN_590 = [(name, "590.48.01-1") for name in (
    "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-persistenced", "nvidia-kernel-support",
    "firmware-nvidia-gsp")] + [("nvidia-driver-pinning-590", "590-1")]
UBUNTU_590 = [(name, "590.48.01-0ubuntu0.24.04.5") for name in ("nvidia-headless-590-open", "nvidia-utils-590")] + [
    (name, "595.84-0ubuntu0.24.04.1") for name in (
        "nvidia-headless-595-open", "nvidia-headless-no-dkms-595-open", "nvidia-dkms-595-open", "nvidia-kernel-common-595",
        "nvidia-firmware-595-595.84", "nvidia-kernel-source-595-open", "libnvidia-compute-595", "nvidia-compute-utils-595",
        "libnvidia-cfg1-595", "nvidia-utils-595")]


def decide(repo, installed, source, distribution, branch, held=(), states=None, flavor="open", profile="compute",
           version="", upgrade=False, hold=True, planned=None, on_disk=None, **extra):
    packages = hs.parse_dpkg_status_file(fx.status_text(repo, installed, held=held, states=states))
    entry = rules.select_entry(DATA, source, distribution, branch)
    wanted = rules.wanted_packages(entry, flavor, profile, "dkms", "generic")
    first = rules.install_first(entry, version)
    planned = {"gpufleet-nvidia-driver-version": ""} if planned is None else planned
    return rules.fast_keep(packages, wanted, first, rules.leave_patterns(DATA, distribution), VERSION_FROM, branch, version,
                           upgrade, entry["lock"] == "hold" and hold, rules.stack_re(entry), planned, on_disk or {}, **extra)


def test_recorded_ubuntu_580_host_is_kept_with_every_package_held():
    installed, held = recorded_ubuntu_580()
    assert len(installed) == 10 and held == {entry[0] for entry in installed}
    result = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held)
    assert result["reasons"] == [] and result["keep"] is True
    assert result["driver_version"] == "580.173.02"
    # the stack is the whole recorded set: the headless meta's closure reaches every one of them
    assert result["packages"] == [{"name": n, "version": v} for n, v in sorted(installed)]
    assert result["holds_missing"] == [] and result["holds_extra"] == []


def test_an_unheld_package_is_a_missing_hold_not_a_reason_to_plan():
    installed, held = recorded_ubuntu_580()
    result = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held - {"nvidia-kernel-common-580"})
    assert result["keep"] is True
    assert result["holds_missing"] == ["nvidia-kernel-common-580"]
    released = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held, hold=False)
    assert released["keep"] is True and released["holds_extra"] == sorted(held)


@pytest.mark.parametrize("change, reason", [
    ({"upgrade": True}, "nvidia_driver_upgrade is true"),
    ({"version": "580.159.03"}, "not on branch 580 version 580.159.03"),
    ({"branch": "595"}, "not installed: nvidia-headless-595-open, nvidia-utils-595"),
    # nvidia-utils-580 serves both flavours; the open packages would be removed (another reason)
    ({"flavor": "proprietary"}, "not installed: nvidia-headless-580"),
    ({"states": {"nvidia-dkms-580-open": "iF"}}, "dpkg left nvidia-dkms-580-open half-way (half-configured ok)"),
    ({"planned": {"gpufleet-nvidia-driver-version": "Package: x\nPin: version 580.173.02-*\nPin-Priority: 1001\n"}},
     "apt preference file gpufleet-nvidia-driver-version differs"),
    ({"index_signature": "new", "agreed_index_signature": "old"}, "the apt indexes changed"),
])
def test_any_failed_condition_means_plan_with_apt(change, reason):
    installed, held = recorded_ubuntu_580()
    args = dict(repo="ubuntu-noble", installed=installed, source="ubuntu", distribution="ubuntu2404", branch="580", held=held)
    args.update(change)
    result = decide(**args)
    assert result["keep"] is False
    assert any(r.startswith(reason) for r in result["reasons"]), result["reasons"]


def test_pin_files_equal_up_to_the_final_newline_apt_reads_them_with():
    installed, held = recorded_ubuntu_580()
    pin = "Package: *\nPin: release l=NVIDIA CUDA\nPin-Priority: 600\n"
    planned = {"gpufleet-nvidia-driver-version": "", "gpufleet-nvidia-cuda": pin}
    kept = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held, planned=planned,
                  on_disk={"gpufleet-nvidia-cuda": pin.rstrip("\n").encode()})
    assert kept["keep"] is True
    absent = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held, planned=planned)
    assert absent["reasons"] == ["apt preference file gpufleet-nvidia-cuda differs from the planned one"]
    left_over = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held,
                       on_disk={"gpufleet-nvidia-driver-version": b"Package: x\n"})
    assert left_over["keep"] is False


def test_a_flavour_switch_removes_the_other_flavour():
    installed, held = recorded_ubuntu_580()
    result = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "580", held=held, flavor="proprietary")
    assert result["reasons"] == [
        "not installed: nvidia-headless-580",
        "installed but not needed by the wanted packages (apt would remove them): libnvidia-cfg1-580, "
        "nvidia-compute-utils-580, nvidia-dkms-580-open, nvidia-headless-580-open, nvidia-headless-no-dkms-580-open, "
        "nvidia-kernel-source-580-open"]
    # what the still wanted nvidia-utils-580 depends on stays (indexes.yml canonical template: nvidia-kernel-common-580-{U},
    # provided by nvidia-kernel-common-580, which depends on the firmware; libnvidia-compute-580 (>= {U}))
    assert {p["name"] for p in result["packages"]} == {"nvidia-utils-580", "nvidia-kernel-common-580",
                                                       "nvidia-firmware-580-580.173.02", "libnvidia-compute-580"}


def test_a_package_of_another_stack_that_apt_would_remove_forbids_keep():
    # the recorded 580 stack plus the 595 DKMS package left behind: it matches the 595 stack's patterns and
    # nothing wanted depends on it, so apt_transaction would remove it
    installed, held = recorded_ubuntu_580()
    extra = installed + [("nvidia-kernel-source-595-open", "595.84-0ubuntu0.24.04.1")]
    result = decide("ubuntu-noble", extra, "ubuntu", "ubuntu2404", "580", held=held)
    assert result["keep"] is False
    assert result["reasons"] == ["installed but not needed by the wanted packages (apt would remove them): "
                                 "nvidia-kernel-source-595-open"]


def test_recorded_nvidia_595_set_has_an_unneeded_modprobe():
    # [N] recorded nvidia-modprobe with the compute packages, but neither libnvidia-compute nor nvidia-dkms-open
    # depends on it (only nvidia-driver[-open] does) and it is in the unsuffixed stack: apt would remove it.
    result = decide("nvidia-ubuntu2404", NVIDIA_595, "nvidia", "ubuntu2404", "595")
    assert result["keep"] is False
    assert result["reasons"] == ["installed but not needed by the wanted packages (apt would remove them): nvidia-modprobe"]
    without = [item for item in NVIDIA_595 if item[0] != "nvidia-modprobe"]
    kept = decide("nvidia-ubuntu2404", without, "nvidia", "ubuntu2404", "595")
    assert kept["keep"] is True and kept["driver_version"] == "595.71.05"
    # the pin lock holds nothing and releases nothing that is not held
    assert kept["holds_missing"] == [] and kept["holds_extra"] == []
    # the pinning package has no driver version (595-1ubuntu1) but is in the stack apt_transaction reports
    assert {"name": "nvidia-driver-pinning-595", "version": "595-1ubuntu1"} in kept["packages"]


def test_a_version_pin_needs_its_own_pinning_package():
    without = [item for item in NVIDIA_595 if item[0] != "nvidia-modprobe"]
    result = decide("nvidia-ubuntu2404", without, "nvidia", "ubuntu2404", "595", version="595.71.05")
    assert result["keep"] is False
    assert result["reasons"][0] == "not installed: nvidia-driver-pinning-595.71.05"


def test_debian12_590_compute_host_is_kept():
    result = decide("nvidia-debian12", DEBIAN_590, "nvidia", "debian12", "590")
    assert result["reasons"] == []
    assert result["driver_version"] == "590.48.01"
    assert [p["name"] for p in result["packages"]] == sorted(entry[0] for entry in DEBIAN_590)


def test_ubuntu_590_after_the_transition_is_not_kept_as_590():
    # The -590 names are on branch 590 by their version, but they depend on the 595 packages, so the stack's
    # driver (the highest, what apt_transaction reports) is 595.84: the role's refusal must run (apt path).
    result = decide("ubuntu-noble", UBUNTU_590, "ubuntu", "ubuntu2404", "590")
    assert result["keep"] is False
    assert result["driver_version"] == "595.84"
    assert result["reasons"] == ["the installed stack is driver 595.84, not branch 590"]


def test_a_held_package_of_the_stack_is_a_hold_even_on_another_branch_request():
    # Asking for 595 on the 580 host: nothing wanted is installed, so nothing of 580 is in the stack.
    installed, held = recorded_ubuntu_580()
    result = decide("ubuntu-noble", installed, "ubuntu", "ubuntu2404", "595", held=held)
    assert result["packages"] == [] and result["driver_version"] == ""
    assert result["keep"] is False


def test_selection_refusals_name_the_variable_and_the_known_values():
    with pytest.raises(rules.RulesError, match="nvidia_driver_branch \"600\" is not in the package data .*\\(known branches: 580, 590, 595\\)"):
        rules.select_entry(DATA, "ubuntu", "ubuntu2404", "600")
    with pytest.raises(rules.RulesError, match="on Debian use nvidia_driver_source: nvidia"):
        rules.select_entry(DATA, "ubuntu", "debian12", "580")


def test_entry_refusals_name_the_flavour_profile_and_the_fix():
    """The checks of the role's former refuse_data.yml assert, now in the state read: same words."""
    entry = rules.select_entry(DATA, "ubuntu", "ubuntu2404", "595")
    rules.check_entry(entry, "ubuntu", "ubuntu2404", "595", "open", "compute", "dkms")  # a usable entry: no error
    rules.check_entry(entry, "ubuntu", "ubuntu2404", "595", "open", "compute", "precompiled")
    with pytest.raises(rules.RulesError, match="source 'ubuntu', ubuntu2404, branch 595 has no open/desktop package set, "
                                               "or its entry lacks lock/pin_package/stack"):
        rules.check_entry(entry, "ubuntu", "ubuntu2404", "595", "open", "desktop", "dkms")
    pin = rules.select_entry(DATA, "nvidia", "debian12", "590")
    with pytest.raises(rules.RulesError, match="package set with precompiled modules .*only Canonical builds signed"):
        rules.check_entry(pin, "nvidia", "debian12", "590", "open", "compute", "precompiled")
    for broken in ({**entry, "lock": "freeze"}, {**entry, "stack": []}, {**pin, "pin_package": ""}):
        with pytest.raises(rules.RulesError, match="Nothing was changed"):
            rules.check_entry(broken, "x", "y", "z", "open", "compute", "dkms")


def test_package_set_helpers_follow_the_role():
    entry = rules.select_entry(DATA, "ubuntu", "ubuntu2404", "595")
    assert rules.wanted_packages(entry, "open", "compute", "precompiled", "generic-hwe-24.04") == [
        "nvidia-headless-no-dkms-595-open", "nvidia-utils-595", "linux-modules-nvidia-595-open-generic-hwe-24.04"]
    assert rules.kernel_flavor_found("", "6.8.0-146-generic", "24.04", {"linux-image-generic-hwe-24.04": "1"}) == "generic-hwe-24.04"
    assert rules.kernel_flavor_found("", "6.8.0-146-generic", "24.04", {}) == "generic"
    assert rules.kernel_flavor_found("lowlatency", "6.8.0-146-generic", "24.04", {}) == "lowlatency"
    pin = rules.select_entry(DATA, "nvidia", "debian12", "590")
    assert rules.install_first(pin, "") == ["nvidia-driver-pinning-590"]
    assert rules.install_first(pin, "590.48.01-1") == ["nvidia-driver-pinning-590.48.01"]
    assert rules.install_first(entry, "595.84") == []
    assert re.match(rules.stack_re(entry), "nvidia-firmware-595-595.84")
    assert not re.match(rules.stack_re(entry), "nvidia-firmware-580-580.173.02")
    leave = rules.leave_patterns(DATA, "ubuntu2404")
    assert "*nvidia*-580" in leave and "nvidia-driver-pinning-*" in leave and len(leave) == len(set(leave))


# -- reboot reasons, Secure Boot, control node ------------------------------------------------------
GPU_LOADED = {"modules_loaded": {"nvidia": True}, "driver_version": "580.173.02", "module_flavor": "open"}


def test_reboot_reasons_same_words_as_kernel_yml():
    assert rules.reboot_reasons(GPU_LOADED, "580.173.02", "open", False) == []
    assert rules.reboot_reasons({"modules_loaded": {"nvidia": False}, "driver_version": None}, "580.173.02", "open", False) == [
        "the nvidia module is not loaded"]
    assert rules.reboot_reasons(dict(GPU_LOADED, module_flavor="proprietary"), "595.84", "open", True) == [
        "the loaded driver is 580.173.02, the installed one 595.84",
        "the loaded module is proprietary, nvidia_driver_flavor is open",
        "the kernel module options changed"]


def test_secure_boot_from_the_efi_variable_bytes():
    # efivarfs: 4 attribute bytes (0x06 = BOOTSERVICE|RUNTIME) then the data byte
    assert rules.secure_boot_on("auto", b"\x06\x00\x00\x00\x01") is True
    assert rules.secure_boot_on("auto", b"\x06\x00\x00\x00\x00") is False
    assert rules.secure_boot_on("auto", None) is False
    assert rules.secure_boot_on("enabled", None) is True
    assert rules.secure_boot_on("disabled", b"\x06\x00\x00\x00\x01") is False


def test_control_node():
    assert rules.is_control_node("local", "gpu1", None, "a", "b")
    assert rules.is_control_node("ssh", "localhost", None, "", "")
    assert rules.is_control_node("ssh", "gpu1", "127.0.0.1", "", "")
    assert rules.is_control_node("ssh", "gpu1", "10.0.0.5", "abc\n", "abc")
    assert not rules.is_control_node("ssh", "gpu1", "10.0.0.5", "", "")
    assert not rules.is_control_node(None, "gpu1", None, "abc", "def")


# -- the verification judge -------------------------------------------------------------------------
def gpu(**overrides):
    info = {"modules_loaded": {"nvidia": True}, "driver_version": "580.173.02", "module_flavor": "open",
            "diagnosis": [], "kernel_log_source": "dmesg", "pci_gpu_count": 2,
            "devices": [{"kind": "gpu", "driver": "nvidia"}, {"kind": "gpu", "driver": "nvidia"}, {"kind": "audio", "driver": None}]}
    info.update(overrides)
    return info


# nvidia-smi --query-gpu=pci.bus_id,name,driver_version --format=csv,noheader (format of docs/hardware records)
SMI_2 = {"rc": 0, "stdout": "00000000:01:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 580.173.02\n"
                            "00000000:02:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 580.173.02"}


def by_check(checks):
    return {c["check"]: c for c in checks}


def test_judge_all_pass():
    checks = by_check(rules.judge(gpu(), "open", 580, "", 0, SMI_2, "580.173.02", "the packages this run installed"))
    assert {name: c["status"] for name, c in checks.items()} == {
        "module_loaded": "pass", "open_kernel_module": "pass", "driver_branch": "pass", "installed_version": "pass",
        "driver_version_pin": "not_checked", "kernel_log": "pass", "gpu_count": "pass"}
    assert checks["module_loaded"]["detail"] == "nvidia 580.173.02 (open) is loaded"
    assert checks["gpu_count"]["detail"] == ("nvidia-smi lists 2 GPU(s); expected 2 (NVIDIA GPUs on the PCI bus outside "
                                             "vfio-pci); 2 NVIDIA GPU(s) on the PCI bus")
    assert rules.failed_message("gpu1", list(checks.values())) == ""


def test_judge_not_loaded():
    diagnosis = [{"code": "driver_not_loaded", "message": "No nvidia module."}]
    checks = by_check(rules.judge(gpu(modules_loaded={"nvidia": False}, driver_version=None, diagnosis=diagnosis),
                                  "open", "580", "", 0, {"rc": 9, "stdout": "NVIDIA-SMI has failed", "msg": ""}, ""))
    assert checks["module_loaded"]["status"] == "fail"
    assert checks["module_loaded"]["fix"].endswith("(dmesg | grep -i NVRM). No nvidia module.")
    assert checks["installed_version"]["detail"] == "no installed driver package known (nvidia-smi is not from a dpkg package)"
    assert checks["gpu_count"]["detail"].startswith("nvidia-smi failed (rc 9): NVIDIA-SMI has failed ;")
    assert [c for c in checks if checks[c]["status"] == "not_checked"] == [
        "open_kernel_module", "driver_branch", "installed_version", "driver_version_pin"]
    message = rules.failed_message("gpu1", list(checks.values()))
    assert message.startswith("NVIDIA driver verification failed on gpu1: [module_loaded] the nvidia kernel module")
    assert "[gpu_count]" in message


def test_judge_mismatches_say_the_fix():
    checks = by_check(rules.judge(
        gpu(module_flavor="proprietary", diagnosis=[{"code": "open_module_required", "message": "NVRM: requires open."}]),
        "open", "595", "595.84", 3, SMI_2, "595.84", "nvidia-utils-595 595.84-0ubuntu0.24.04.1"))
    assert checks["open_kernel_module"]["status"] == "fail"
    assert checks["driver_branch"]["fix"].startswith('Driver branch mismatch: the host runs 580.173.02 (branch 580) but '
                                                     'nvidia_driver_branch is "595".')
    assert checks["installed_version"]["detail"] == "loaded 580.173.02, installed 595.84 (nvidia-utils-595 595.84-0ubuntu0.24.04.1)"
    assert checks["driver_version_pin"]["fix"] == "Reboot into 595.84 or correct nvidia_driver_version."
    assert checks["kernel_log"] == {"check": "kernel_log", "status": "fail", "detail": "NVRM: requires open.",
                                    "fix": "Set nvidia_driver_flavor: open, run the role, reboot."}
    assert checks["gpu_count"]["status"] == "fail"
    assert "expected 3 (nvidia_driver_expected_gpu_count)" in checks["gpu_count"]["detail"]
    assert 'dmesg | grep -i "NVRM\\|Xid"' in checks["gpu_count"]["fix"]


def test_judge_vfio_gpus_are_not_expected_and_no_gpu_fails():
    info = gpu(devices=[{"kind": "gpu", "driver": "vfio-pci"}])
    checks = by_check(rules.judge(info, "open", "580", "", 0, {"rc": 0, "stdout": ""}, "580.173.02", "x"))
    # expected 0 GPUs: the count check fails rather than passing on an empty host
    assert checks["gpu_count"]["status"] == "fail"
    assert "expected 0" in checks["gpu_count"]["detail"]


# -- the keep record (apt's stored judgement) ---------------------------------------------------------
def _request(**overrides):
    base = dict(source="ubuntu", distribution="ubuntu2404", branch="580", version="", flavor="open", profile="compute",
                kernel_modules="dkms", wanted=["nvidia-headless-580-open", "nvidia-utils-580"], first=[],
                leave=["nvidia-*-580"], version_from=VERSION_FROM)
    base.update(overrides)
    return rules.keep_request(**base)


STACK = [{"name": "nvidia-utils-580", "version": UBUNTU_580_V}]


def test_a_record_vouches_only_for_the_same_request_indexes_and_stack():
    record = rules.keep_record(_request(), "sig", STACK, "580.173.02")
    stored = rules.parse_keep_record(__import__("json").dumps(record))
    assert rules.keep_record_reasons(stored, _request(), "sig", STACK, "580.173.02") == []
    assert rules.keep_record_reasons(None, _request(), "sig", STACK, "580.173.02")[0].startswith("no stored apt judgement")
    assert rules.keep_record_reasons(stored, _request(branch="595", wanted=["x"]), "sig", STACK, "580.173.02") == [
        "the request changed since apt last agreed (branch, wanted)"]
    assert rules.keep_record_reasons(stored, _request(), "other", STACK, "580.173.02") == [
        "the apt indexes, sources or preferences changed since apt last agreed"]
    moved = [{"name": "nvidia-utils-580", "version": "580.159.03-0ubuntu0.24.04.1"}]
    assert rules.keep_record_reasons(stored, _request(), "sig", moved, "580.159.03") == [
        "the installed driver stack is not the one apt left"]


@pytest.mark.parametrize("text", [None, b"", b"not json", b"[]", b'{"format": 0}'])
def test_an_unreadable_or_foreign_record_is_no_record(text):
    assert rules.parse_keep_record(text) is None


def test_the_index_signature_follows_lists_sources_and_preferences():
    lists = [("a_Packages", 10, 1)]
    apt = {"/etc/apt/sources.list.d/x.sources": b"Types: deb\n", "/etc/apt/preferences.d/p": None}
    base = rules.index_signature(lists, apt)
    assert rules.index_signature(list(lists), dict(apt)) == base
    assert rules.index_signature([("a_Packages", 10, 2)], apt) != base  # apt-get update fetched it again
    assert rules.index_signature(lists, dict(apt, **{"/etc/apt/preferences.d/p": b"Pin: version 1\n"})) != base
    assert rules.index_signature(lists, dict(apt, **{"/etc/apt/preferences.d/p": b""})) != base  # empty != absent
    assert rules.index_signature(lists, {"/etc/apt/sources.list.d/x.sources": b"Types: deb\n"}) != base


def test_the_record_is_stored_only_when_dpkg_reproduces_what_apt_left():
    keep = {"reasons": [], "packages": STACK, "driver_version": "580.173.02"}
    assert rules.recordable_reasons(keep, STACK, "580.173.02") == []
    assert rules.recordable_reasons(dict(keep, reasons=["not installed: x"]), STACK, "580.173.02") == [
        "the fast keep would not keep: not installed: x"]
    more = STACK + [{"name": "nvidia-modprobe", "version": "595.71.05-1ubuntu1"}]
    assert rules.recordable_reasons(keep, more, "580.173.02")[0].startswith("dpkg's closure gives the stack")
    assert rules.recordable_reasons(keep, STACK, "595.71.05") == ["dpkg gives driver 580.173.02, apt 595.71.05"]


@pytest.mark.parametrize("keep, record_reasons, upgrade, unknowable, fast", [
    (True, [], False, False, True),
    (False, [], False, False, False),
    (True, ["no stored apt judgement"], False, False, False),
    (True, [], True, False, False),
    (True, [], False, True, False),
])
def test_the_fast_path_needs_every_condition(keep, record_reasons, upgrade, unknowable, fast):
    assert rules.fast_path({"keep": keep}, record_reasons, upgrade, unknowable) is fast


# -- issue 33: keep decided from what is installed; a mixed stack is refused -------------------------------------
# The installed sets below are the two recorded builds of the mirrored archive (indexes.yml: [U] 580.159.03 and
# 580.173.02, [C] the last real 590, 590.48.01-0ubuntu0.24.04.4) and the mixed state that `apt-get install
# --ignore-hold nvidia-dkms-580-open` leaves on the 580.159.03 host once 580.173.02 is published (observed in
# tests/integration/driver/test_driver_keep.py's container, real apt): every package at 580.173.02 except
# nvidia-headless-580-open and the old firmware package.
UBUNTU_580_OLD_V = "580.159.03-0ubuntu0.24.04.1"
UBUNTU_580_NAMES = ("nvidia-headless-580-open", "nvidia-headless-no-dkms-580-open", "nvidia-dkms-580-open",
                    "nvidia-kernel-common-580", "nvidia-kernel-source-580-open", "libnvidia-compute-580",
                    "nvidia-compute-utils-580", "libnvidia-cfg1-580", "nvidia-utils-580")
UBUNTU_580_OLD = [(name, UBUNTU_580_OLD_V) for name in UBUNTU_580_NAMES] + [("nvidia-firmware-580-580.159.03", UBUNTU_580_OLD_V)]
UBUNTU_580_MIXED = ([("nvidia-headless-580-open", UBUNTU_580_OLD_V), ("nvidia-firmware-580-580.159.03", UBUNTU_580_OLD_V)]
                    + [(name, UBUNTU_580_V) for name in UBUNTU_580_NAMES[1:]]
                    + [("nvidia-firmware-580-580.173.02", UBUNTU_580_V)])
UBUNTU_590_REAL_V = "590.48.01-0ubuntu0.24.04.4"
UBUNTU_590_REAL = [(name.replace("580", "590"), UBUNTU_590_REAL_V) for name in UBUNTU_580_NAMES] + [
    ("nvidia-firmware-590-590.48.01", UBUNTU_590_REAL_V)]


def test_an_older_build_of_the_branch_is_kept_from_what_is_installed():
    # apt's candidates (580.173.02) play no part: every condition is about dpkg's packages.
    result = decide("ubuntu-noble", UBUNTU_580_OLD, "ubuntu", "ubuntu2404", "580", held={n for n, _v in UBUNTU_580_OLD})
    assert result["installed_keep"] is True and result["installed_reasons"] == [] and result["mixed"] == {}
    assert result["driver_version"] == "580.159.03"
    assert "nvidia-firmware-580-580.159.03" in [p["name"] for p in result["packages"]]


def test_the_seeds_real_590_is_kept_as_590():
    result = decide("ubuntu-noble-before-2026-03", UBUNTU_590_REAL, "ubuntu", "ubuntu2404", "590")
    assert result["installed_keep"] is True and result["driver_version"] == "590.48.01"


def test_a_version_pin_keeps_only_that_version():
    result = decide("ubuntu-noble", UBUNTU_580_OLD, "ubuntu", "ubuntu2404", "580", version="580.173.02")
    assert result["installed_keep"] is False
    assert any("not on branch 580 version 580.173.02" in reason for reason in result["installed_reasons"])


def test_a_mixed_stack_is_no_keep_and_named_package_by_package():
    result = decide("ubuntu-noble", UBUNTU_580_MIXED, "ubuntu", "ubuntu2404", "580")
    assert result["installed_keep"] is False and result["keep"] is False
    # The old firmware package is no longer needed by the installed kernel-common (580.173.02): not in the stack.
    assert result["mixed"] == {UBUNTU_580_OLD_V: ["nvidia-headless-580-open"],
                               UBUNTU_580_V: sorted(UBUNTU_580_NAMES[1:] + ("nvidia-firmware-580-580.173.02",))}
    message = rules.mixed_stack_refusal("gpu-1", result["mixed"], "580", "")
    assert "gpu-1" in message and "nvidia-headless-580-open at " + UBUNTU_580_OLD_V in message
    assert "nvidia-dkms-580-open" in message and UBUNTU_580_V in message
    assert "Nothing was changed" in message and "nvidia_driver_upgrade: true" in message


def test_the_transitional_590_stack_is_one_driver_but_not_590():
    # The -590 transitional names at 590.48.01 with the 595.84 packages they depend on: one driver (595.84).
    result = decide("ubuntu-noble", UBUNTU_590, "ubuntu", "ubuntu2404", "590")
    assert result["mixed"] == {} and result["installed_keep"] is False
