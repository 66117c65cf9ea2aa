"""module_utils/pve_guest.py: Proxmox guest configs against the GPUs a switch moves.

The configs are written in Proxmox's own formats (qemu-server PCI.pm `$hostpci_fmt`, pve-container
Config.pm `$dev_desc`, pve-guest-common Mapping/PCI.pm), as `qm config` / `pct config` print them;
the PCI tree is tests/support/fake_sysfs.FakeKernel (TEST DOUBLE: no GPUs here), 8 GPUs + 8 audio
functions, GPU i+1 in IOMMU group 10+i, /dev/nvidiaN with N = bus - 1 while on nvidia.
"""

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.pve_guest import (
    GuestConfigError, compare_ct, compare_vm, ct_device_nodes, expand_pci_id, parse_config, parse_pci_mapping,
    vm_functions)
from support.fake_sysfs import FakeKernel

GPUS = ["0000:%02x:00.0" % (i + 1) for i in range(8)]
AUDIO = ["0000:%02x:00.1" % (i + 1) for i in range(8)]
ALL = sorted(GPUS + AUDIO)
MAPPING = "pro6000\n" + "".join(
    "\tmap id=10de:2bb1,iommugroup=%d,node=pve,path=0000:%02x:00,subsystem-id=10de:204b\n" % (10 + i, i + 1)
    for i in range(8)) + "\nother\n\tmap id=8086:1572,node=pve,path=0000:41:00.0\n"


@pytest.fixture
def kernel(tmp_path):
    return FakeKernel(str(tmp_path / "host")).build(driver="nvidia")


def vm(lines):
    return parse_config("boot: order=scsi0\nmemory: 262144\nname: ml-pipelines\n" + "".join(l + "\n" for l in lines))


def test_host_ids_with_and_without_function_domain_and_lists(kernel):
    config = vm(["hostpci0: 0000:01:00,pcie=1", "hostpci1: 02:00.0", "hostpci2: host=03:00.0;03:00.1,x-vga=1",
                 "hostpci3: 0000:04:00.1"])
    entries, functions = vm_functions(config, kernel.sys, {}, "pve")
    assert [e["functions"] for e in entries] == [
        ["0000:01:00.0", "0000:01:00.1"], ["0000:02:00.0"], ["0000:03:00.0", "0000:03:00.1"], ["0000:04:00.1"]]
    assert functions == sorted(["0000:01:00.0", "0000:01:00.1", "0000:02:00.0", "0000:03:00.0", "0000:03:00.1",
                                "0000:04:00.1"])


def test_mapping_resolves_for_this_node_like_the_seed_users_pro6000(kernel):
    config = vm(["hostpci%d: mapping=pro6000,pcie=1" % i for i in range(8)])
    mappings = parse_pci_mapping(MAPPING)
    assert len(mappings["pro6000"]) == 8 and mappings["other"][0]["path"] == "0000:41:00.0"
    _entries, functions = vm_functions(config, kernel.sys, mappings, "pve")
    assert functions == ALL
    assert compare_vm(ALL, functions, kernel.sys) == []
    with pytest.raises(GuestConfigError, match="no device on node 'pve2'"):
        vm_functions(config, kernel.sys, mappings, "pve2")


def test_fewer_entries_than_mapped_devices_is_refused(kernel):
    config = vm(["hostpci%d: mapping=pro6000" % i for i in range(4)])
    with pytest.raises(GuestConfigError, match="lists 8 devices on node 'pve' but only 4 hostpci entries"):
        vm_functions(config, kernel.sys, parse_pci_mapping(MAPPING), "pve")


@pytest.mark.parametrize("line, message", [
    ("hostpci0: mapping=pro6000,host=01:00", "both host and mapping"),
    ("hostpci0: pcie=1", "neither host nor mapping"),
    ("hostpci0: 1:0.0", "is not a PCI id"),
])
def test_malformed_entries_are_refused(kernel, line, message):
    with pytest.raises(GuestConfigError, match=message):
        vm_functions(vm([line]), kernel.sys, parse_pci_mapping(MAPPING), "pve")


def test_vm_missing_a_moved_gpu_or_naming_an_unmoved_one(kernel):
    config = vm(["hostpci%d: 0000:%02x:00,pcie=1" % (i, i + 1) for i in range(7)])
    _entries, functions = vm_functions(config, kernel.sys, {}, "pve")
    assert compare_vm(ALL, functions, kernel.sys) == ["0000:08:00.0 (GPU) is moved but no hostpci entry names it"]
    moved = [a for a in ALL if not a.startswith("0000:07:")]
    config = vm(["hostpci%d: 0000:%02x:00,pcie=1" % (i, i + 1) for i in range(7)])
    _entries, functions = vm_functions(config, kernel.sys, {}, "pve")
    problems = compare_vm(moved, functions, kernel.sys)
    assert problems == ["0000:08:00.0 (GPU) is moved but no hostpci entry names it",
                        "0000:07:00.0 (gpu, on nvidia) is named by a hostpci entry but is not moved: the VM would "
                        "take it from the host when it starts",
                        "0000:07:00.1 (audio, on snd_hda_intel) is named by a hostpci entry but is not moved: the VM "
                        "would take it from the host when it starts"]


def test_an_absent_function_is_reported(kernel):
    _entries, functions = vm_functions(vm(["hostpci0: 0000:09:00.0"]), kernel.sys, {}, "pve")
    assert "0000:09:00.0 is named by a hostpci entry but is not on the PCI bus" in compare_vm(ALL, functions, kernel.sys)


def ct(lines):
    return parse_config("arch: amd64\ncores: 64\nhostname: llm-server\n" + "".join(l + "\n" for l in lines))


CT_GOOD = ["dev%d: /dev/nvidia%d,gid=44" % (i, i) for i in range(8)] + [
    "dev8: path=/dev/nvidiactl,mode=0666", "lxc.cgroup2.devices.allow: c 195:* rwm",
    "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file"]


def test_container_nodes_from_dev_entries_and_raw_mounts():
    nodes = ct_device_nodes(ct(CT_GOOD))
    assert nodes["/dev/nvidia3"] == "dev3" and nodes["/dev/nvidiactl"] == "dev8"
    assert nodes["/dev/nvidia-uvm"] == "lxc.mount.entry"
    assert "c 195:* rwm" not in str(nodes)


def test_container_check_uses_the_gpus_device_numbers_while_on_nvidia(kernel):
    assert compare_ct(ALL, ct_device_nodes(ct(CT_GOOD)), kernel.sys, kernel.proc) == ([], [])
    lines = [l for l in CT_GOOD if not l.startswith(("dev5:", "dev8:"))]
    problems, unknown = compare_ct(ALL, ct_device_nodes(ct(lines)), kernel.sys, kernel.proc)
    assert unknown == []
    assert problems == ["/dev/nvidiactl is not passed to the container",
                        "/dev/nvidia5 is GPU 0000:06:00.0 but is not passed to the container"]


def test_gpus_on_vfio_have_no_number_yet_so_only_the_count_is_checked(tmp_path):
    kernel = FakeKernel(str(tmp_path / "vm-side")).build(driver="vfio-pci")
    assert compare_ct(ALL, ct_device_nodes(ct(CT_GOOD)), kernel.sys, kernel.proc) == ([], GPUS)
    lines = [l for l in CT_GOOD if not l.startswith(("dev6:", "dev7:"))]
    problems, unknown = compare_ct(ALL, ct_device_nodes(ct(lines)), kernel.sys, kernel.proc)
    assert unknown == GPUS and len(problems) == 1
    assert problems[0].startswith("8 GPUs (0000:01:00.0, ") and "names only 6 other /dev/nvidiaN nodes" in problems[0]


def test_expand_pci_id_normalises():
    assert expand_pci_id("/nonexistent", "01:00.1") == ["0000:01:00.1"]
    assert expand_pci_id("/nonexistent", "0000:0A:00") == ["0000:0a:00.0"]
