"""gpu_info.collect against the fake sysfs/procfs tree of tests/support/fake_sysfs.py.

The tree and the NVML object below are TEST DOUBLES: no GPU or NVIDIA driver exists on the
development/CI machines. nvidia-smi output parsing uses text captured in the documented CSV format;
the real NVML/nvidia-smi path is exercised on the GPU test host by tests/hardware/run_gpu_info.sh.
"""

import os
from types import SimpleNamespace

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import gpu_info as gi
from support.fake_sysfs import FakeKernel

BLACKWELL_LOG = ("[    5.1] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2bb1)\n"
                 "NVRM: installed in this system requires use of the NVIDIA open kernel modules.\n"
                 "[    5.2] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\n")


def collect(kernel, **kw):
    kw.setdefault("probe", "sysfs")
    kw.setdefault("modules_root", str(kernel.base) + "/lib/modules")
    return gi.collect(kernel.sys, kernel.proc, kernel.dev, **kw)


def test_eight_gpus_on_nvidia_sysfs_only(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build()
    kernel.add_process(31337, "python3", [kernel.dev + "/nvidia2"])
    facts = collect(kernel)
    assert facts["source"] == "sysfs"
    assert facts["driver_version"] == "580.159.04"
    assert facts["module_flavor"] == "open" and facts["module_flavor_source"] == "proc"
    assert facts["pci_gpu_count"] == 8 and facts["gpu_count"] == 8
    assert facts["iommu_enabled"] is True
    assert facts["modules_loaded"] == {"nvidia": True, "nvidia_uvm": True, "nvidia_drm": True,
                                       "nvidia_modeset": True, "vfio_pci": True}
    gpu = facts["devices"][0]
    assert gpu["address"] == "0000:01:00.0" and gpu["kind"] == "gpu" and gpu["driver"] == "nvidia"
    assert gpu["vendor_id"] == "0x10de" and gpu["device_id"] == "0x2bb1" and gpu["class"] == "0x030200"
    assert gpu["iommu_group"] == 10 and gpu["iommu_group_members"] == ["0000:01:00.0", "0000:01:00.1"]
    assert gpu["driver_override"] is None and gpu["numa_node"] == 0
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert facts["devices"][1]["kind"] == "audio" and facts["devices"][1]["driver"] == "snd_hda_intel"
    assert facts["devices"][4]["processes"] == [{"pid": 31337, "name": "python3", "used_memory_mib": None}]
    assert facts["diagnosis"] == []


def test_all_on_vfio_without_driver_installed(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(driver="vfio-pci", drivers=("vfio-pci",), modules=())
    facts = collect(kernel, probe="auto", smi_path=None)
    assert facts["source"] == "sysfs"
    assert facts["driver_version"] is None and facts["module_flavor"] is None
    assert facts["gpu_count"] == 0 and facts["pci_gpu_count"] == 8 and facts["vfio_bound_count"] == 8
    assert {d["driver"] for d in facts["devices"]} == {"vfio-pci"}
    assert {d["driver_override"] for d in facts["devices"]} == {"vfio-pci"}
    assert facts["modules_loaded"]["nvidia"] is False and facts["modules_loaded"]["vfio_pci"] is True
    assert facts["diagnosis"] == []  # all on vfio-pci is a valid state, not a problem
    assert any("pynvml" in e or "NVML" in e for e in facts["probe_errors"])


def test_open_module_required_from_kernel_log(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(driver=None, flavor="proprietary")
    facts = collect(kernel, kernel_log=BLACKWELL_LOG, kernel_log_source="test")
    codes = [d["code"] for d in facts["diagnosis"]]
    assert "open_module_required" in codes
    msg = facts["diagnosis"][codes.index("open_module_required")]["message"]
    assert "nvidia-driver-<branch>-open" in msg and "proprietary" in msg
    assert facts["module_flavor"] == "proprietary"


def test_nvidia_smi_no_devices_found(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(driver=None, flavor="proprietary")

    def run(argv):
        return 6, "No devices were found\n", ""
    facts = collect(kernel, probe="auto", run=run, smi_path="/usr/bin/nvidia-smi")
    assert facts["source"] == "nvidia-smi" and facts["gpu_count"] == 0
    codes = [d["code"] for d in facts["diagnosis"]]
    assert "no_devices_found" in codes and "open_module_required" in codes and "gpu_without_driver" in codes


def test_driver_not_loaded(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(driver=None, drivers=("snd_hda_intel",), modules=())
    facts = collect(kernel)
    assert [d["code"] for d in facts["diagnosis"]] == ["driver_not_loaded"]


def test_no_nvidia_device_at_all(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=0)
    facts = collect(kernel)
    assert facts["devices"] == [] and [d["code"] for d in facts["diagnosis"]] == ["no_devices_found"]


def test_nvidia_smi_csv_parsing(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=2)
    gpus = ("00000000:01:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-aaaa, 12.0, 97887, 1024, 96863, "
            "Enabled, 580.159.04\n"
            "00000000:02:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-bbbb, 12.0, 97887, 0, 97887, "
            "Disabled, 580.159.04\n")
    apps = "00000000:01:00.0, 4242, /usr/bin/python3, 1000\n"
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, gpus if "--query-gpu" in argv[1] else apps, ""
    facts = collect(kernel, probe="nvidia-smi", run=run, smi_path="nvidia-smi")
    assert facts["source"] == "nvidia-smi" and facts["gpu_count"] == 2
    first = facts["devices"][0]
    assert first["compute_capability"] == "12.0" and first["memory_total_mib"] == 97887
    assert first["persistence_mode"] is True and first["uuid"] == "GPU-aaaa"
    assert first["processes"] == [{"pid": 4242, "name": "python3", "used_memory_mib": 1000}]
    assert facts["devices"][2]["persistence_mode"] is False
    assert len(calls) == 2


def test_explicit_probe_failures_raise(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=1)
    with pytest.raises(gi.GpuInfoError, match="not on PATH"):
        collect(kernel, probe="nvidia-smi", smi_path=None)
    with pytest.raises(gi.GpuInfoError, match="probe='bogus'"):
        collect(kernel, probe="bogus")


class FakeNvml:
    """TEST DOUBLE of the pynvml module surface gpu_info uses (names and return shapes of nvidia-ml-py)."""

    def __init__(self, fail_init=False):
        self.fail_init = fail_init
        self.shutdown = False

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=b"00000000:01:00.0")

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=143771 * 2**20, used=512 * 2**20, free=143259 * 2**20)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return (9, 0)

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=99, usedGpuMemory=256 * 2**20)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return [SimpleNamespace(pid=99, usedGpuMemory=256 * 2**20)]

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-1234"


def test_nvml_path(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=1)
    os.makedirs(kernel.proc + "/99")
    with open(kernel.proc + "/99/comm", "w", encoding="utf-8") as handle:
        handle.write("vllm\n")
    nvml = FakeNvml()
    facts = collect(kernel, probe="auto", pynvml=nvml)
    assert facts["source"] == "nvml" and nvml.shutdown and facts["gpu_count"] == 1
    gpu = facts["devices"][0]
    assert gpu["compute_capability"] == "9.0" and gpu["memory_total_mib"] == 143771
    assert gpu["processes"] == [{"pid": 99, "name": "vllm", "used_memory_mib": 256}]


def test_nvml_failure_falls_back_in_auto_only(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=1)
    facts = collect(kernel, probe="auto", pynvml=FakeNvml(fail_init=True), smi_path=None)
    assert facts["source"] == "sysfs" and "NVML init failed" in facts["probe_errors"][0]
    with pytest.raises(gi.GpuInfoError, match="NVML init failed"):
        collect(kernel, probe="nvml", pynvml=FakeNvml(fail_init=True))


def test_flavor_from_installed_module_file(tmp_path):
    kernel = FakeKernel(str(tmp_path)).build(gpus=1, driver=None, drivers=(), modules=())
    import lzma
    path = tmp_path / "lib/modules/6.8.0-generic/updates/dkms"
    path.mkdir(parents=True)
    with lzma.open(path / "nvidia.ko.xz", "wb") as handle:
        handle.write(b"\x7fELF....\x00license=Dual MIT/GPL\x00version=580.159.04\x00")
    facts = collect(kernel, kernel_release="6.8.0-generic")
    assert facts["module_flavor"] == "open" and facts["module_flavor_source"] == "module_file"
    assert gi.flavor_from_license("NVIDIA") == "proprietary"


@pytest.mark.parametrize("raw,expected", [("00000000:01:00.0", "0000:01:00.0"), ("01:00.0", "0000:01:00.0"),
                                          ("0000:C1:00.0", "0000:c1:00.0")])
def test_normalize_address(raw, expected):
    assert gi.normalize_address(raw) == expected


def test_version_parsing_of_both_flavours():
    assert gi.VERSION_RE.search("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release").group(1) \
        == "580.159.04"
    assert gi.VERSION_RE.search("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu").group(1) == "550.54.14"
