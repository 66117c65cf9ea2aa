"""The refusals nvidia_driver_state returns (refuse.yml's asserts before issue 20, same words) and their order.

The GPUs are gpu_info-shaped dicts with real PCI device ids (NVIDIA's published ids: 0x2bb1 RTX PRO 6000 Blackwell,
0x2330 H100 SXM5, 0x1eb8 Tesla T4, 0x1db4 Tesla V100) and compute capabilities as nvidia-smi reports them. The MOK
checks run against real files under tmp_path; `mokutil` is a TEST DOUBLE (no firmware here): its answers are the
two sentences mokutil 0.6 prints ("... is already enrolled", "... is not enrolled").
"""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import nvidia_driver_rules as rules
from ansible_collections.gpufleet.llm_server.plugins.module_utils.nvidia_driver_state import HostIO, _secure_boot_refusals

BLACKWELL = {"kind": "gpu", "address": "0000:01:00.0", "device_id": "0x2bb1"}
HOPPER = {"kind": "gpu", "address": "0000:02:00.0", "device_id": "0x2330", "compute_capability": "9.0"}
TURING = {"kind": "gpu", "address": "0000:03:00.0", "device_id": "0x1eb8"}
VOLTA = {"kind": "gpu", "address": "0000:04:00.0", "device_id": "0x1db4", "compute_capability": "7.0"}
AUDIO = {"kind": "audio", "address": "0000:01:00.1", "device_id": "0x22e8"}


def test_generation_rule():
    found = {gen["address"]: (gen["blackwell_or_newer"], gen["turing_or_newer"])
             for gen in rules.gpu_generations([BLACKWELL, HOPPER, TURING, VOLTA,
                                               {"address": "x", "device_id": "0x2330", "compute_capability": "12.0"}])}
    assert found == {"0000:01:00.0": (True, True), "0000:02:00.0": (False, True), "0000:03:00.0": (False, True),
                     "0000:04:00.0": (False, False), "x": (True, True)}  # the capability wins over the device id


def test_open_on_new_gpus_refuses_nothing():
    assert rules.module_refusals({"devices": [BLACKWELL, HOPPER, TURING, AUDIO]}, "open", False, "gpu1") == []


def test_proprietary_on_blackwell_and_turing():
    found = rules.module_refusals({"devices": [BLACKWELL, TURING, AUDIO]}, "proprietary", False, "gpu1")
    assert found == [
        "nvidia_driver_flavor is 'proprietary' but gpu1 has GPU(s) that only run with NVIDIA's open kernel module: "
        "0000:01:00.0. The proprietary module loads, then logs \"requires use of the NVIDIA open kernel modules\" and "
        "nvidia-smi finds no devices. Set nvidia_driver_flavor: open.",
        "nvidia_driver_flavor is 'proprietary' but GPU(s) 0000:01:00.0, 0000:03:00.0 are Turing or newer, where "
        "NVIDIA's open kernel module is the supported path. Set nvidia_driver_flavor: open, or set "
        "nvidia_driver_allow_proprietary: true to keep the proprietary module on these (pre-Blackwell) GPUs."]
    # allowed: only the Blackwell refusal stays
    assert len(rules.module_refusals({"devices": [BLACKWELL, TURING]}, "proprietary", True, "gpu1")) == 1
    assert rules.module_refusals({"devices": [TURING]}, "proprietary", True, "gpu1") == []


def test_the_kernel_logs_diagnosis_refuses_proprietary():
    info = {"devices": [], "diagnosis": [{"code": "open_module_required", "message": "NVRM: requires open"}]}
    assert rules.module_refusals(info, "proprietary", True, "gpu1")[0].endswith(
        "open kernel module: NVRM: requires open. The proprietary module loads, then logs \"requires use of the NVIDIA "
        "open kernel modules\" and nvidia-smi finds no devices. Set nvidia_driver_flavor: open.")


def test_open_on_volta():
    assert rules.module_refusals({"devices": [VOLTA]}, "open", False, "gpu1") == [
        "nvidia_driver_flavor is 'open' but GPU(s) 0000:04:00.0 are older than Turing, which the open kernel module "
        "does not support (and branch 590 dropped entirely). Use nvidia_driver_flavor: proprietary with "
        "nvidia_driver_branch \"580\" or older."]
    assert rules.module_refusals({"devices": [VOLTA]}, "proprietary", False, "gpu1") == []


def params(**overrides):
    base = {"secure_boot": "enabled", "kernel_modules": "dkms", "mok_key": "", "mok_certificate": ""}
    base.update(overrides)
    return base


def test_secure_boot_without_a_mok():
    found = _secure_boot_refusals(HostIO(lambda argv: None, root="/nonexistent"), params(), True)
    assert len(found) == 1 and found[0].startswith(
        "Secure Boot is on (nvidia_driver_secure_boot: enabled) and nvidia_driver_mok_key / nvidia_driver_mok_certificate "
        "are not set, so the kernel would refuse the DKMS-built nvidia modules. Nothing was installed.")
    assert "nvidia_driver_kernel_modules: precompiled" in found[0]
    assert _secure_boot_refusals(HostIO(lambda argv: None), params(secure_boot="auto"), True)[0].startswith(
        "Secure Boot is on (read from the EFI variable SecureBoot)")
    assert _secure_boot_refusals(HostIO(lambda argv: None), params(kernel_modules="precompiled"), True) == []
    assert _secure_boot_refusals(HostIO(lambda argv: None), params(), False) == []


@pytest.mark.parametrize("answer, refused", [
    ("/var/lib/dkms/mok.der is already enrolled\n", False),
    ("/var/lib/dkms/mok.der is not enrolled\n", True),
    (None, False),  # no mokutil: not refused (the old task's failed_when: false)
])
def test_mok_files_and_enrolment(tmp_path, answer, refused):
    (tmp_path / "var/lib/dkms").mkdir(parents=True)
    (tmp_path / "var/lib/dkms/mok.key").write_text("key")
    (tmp_path / "var/lib/dkms/mok.der").write_text("der")
    asked = []

    def run(argv):
        asked.append(argv)
        return None if answer is None else (0 if not refused else 1, answer, "")

    found = _secure_boot_refusals(HostIO(run, root=str(tmp_path)),
                                  params(mok_key="/var/lib/dkms/mok.key", mok_certificate="/var/lib/dkms/mok.der"), True)
    assert asked == [["mokutil", "--test-key", "/var/lib/dkms/mok.der"]]
    assert found == ([
        "mokutil says /var/lib/dkms/mok.der is not enrolled, so modules DKMS signs with it would not load under Secure "
        "Boot. Nothing was installed. Run `mokutil --import /var/lib/dkms/mok.der`, reboot, confirm \"Enroll MOK\" in "
        "MOK Manager, then run the role again."] if refused else [])


def test_missing_mok_files(tmp_path):
    found = _secure_boot_refusals(HostIO(lambda argv: None, root=str(tmp_path)),
                                  params(mok_key="/var/lib/dkms/mok.key", mok_certificate="/var/lib/dkms/mok.der"), True)
    assert found == ["Secure Boot is on and nvidia_driver_mok_key / nvidia_driver_mok_certificate name files missing on "
                     "the host: /var/lib/dkms/mok.key, /var/lib/dkms/mok.der. Create and enrol the key pair first (see "
                     "docs/nvidia-driver.md \"Secure Boot\")."]
