"""pci_bind.Binder against tests/support/fake_sysfs.FakeKernel.

The fake kernel is a TEST DOUBLE: no machine here has GPUs to rebind, and the GPU test host is
read-only. It emulates the kernel's unbind/bind/drivers_probe/driver_override semantics on a
directory tree (see its docstring); the Binder writes to it through the same path strings it
uses on a real /sys.
"""

import errno

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.pci_bind import BindError, Binder
from support.fake_sysfs import FakeKernel

GPUS = ["0000:%02x:00.0" % (i + 1) for i in range(8)]
AUDIO = ["0000:%02x:00.1" % (i + 1) for i in range(8)]


def make(tmp_path, driver="nvidia", **kw):
    kernel = FakeKernel(str(tmp_path / "host")).build(driver=driver, **kw)
    loaded = []

    def run(argv):
        # Test double for `modprobe` / `nvidia-modprobe` on the fake tree.
        loaded.append(argv)
        if argv[0] == "modprobe":
            kernel.load_module(argv[1])
        return 0, "", ""

    binder = Binder(kernel.sys, kernel.proc, kernel.dev, write=kernel.write, run=run,
                    settle_timeout=0.3, companion_settle=0.05)
    return kernel, binder, loaded


def move(binder, target, devices=("all",), **kw):
    plan = binder.plan(list(devices), target, **kw)
    return plan, binder.apply(plan)


def test_all_gpus_to_vfio_and_back(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    plan, result = move(binder, "vfio-pci")
    assert [e["address"] for e in result] == sorted(GPUS + AUDIO)
    assert all(e["action"] == "rebind" for e in result)
    assert dict(kernel.state()) == {a: ("vfio-pci", "vfio-pci") for a in GPUS + AUDIO}
    # Order: every override before any unbind, every unbind before any probe.
    ops = [op for op, _a, _v in binder.operations]
    assert ops == ["driver_override"] * 16 + ["unbind"] * 16 + ["drivers_probe"] * 16

    binder2 = Binder(kernel.sys, kernel.proc, kernel.dev, write=kernel.write, settle_timeout=0.3,
                     companion_settle=0.05)
    _plan, back = move(binder2, "nvidia")
    state = kernel.state()
    assert {state[a] for a in GPUS} == {("nvidia", None)}
    assert {state[a] for a in AUDIO} == {("snd_hda_intel", None)}
    assert all(e["after"]["driver"] == "nvidia" for e in back if e["kind"] == "gpu")


def test_idempotent_second_run_plans_nothing(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    move(binder, "vfio-pci")
    before = kernel.state()
    again = Binder(kernel.sys, kernel.proc, kernel.dev, write=kernel.write)
    plan = again.plan(["all"], "vfio-pci")
    assert [e["action"] for e in plan["devices"]] == ["none"] * 16
    again.apply(plan)
    assert again.operations == []
    assert kernel.state() == before


def test_override_only_when_driver_already_right(tmp_path):
    kernel, binder, _loaded = make(tmp_path, driver="vfio-pci")
    kernel._set_override(GPUS[0], None)  # bound through vfio-pci ids= without an override
    plan = binder.plan([GPUS[0]], "vfio-pci")
    assert plan["devices"][0]["action"] == "override"
    binder.apply(plan)
    assert binder.operations == [("driver_override", GPUS[0], "vfio-pci")]
    assert kernel.state()[GPUS[0]] == ("vfio-pci", "vfio-pci")


def test_group_companion_included_by_default_and_not_when_disabled(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    plan = binder.plan([GPUS[2]], "vfio-pci")
    expected = [(GPUS[2], "requested"), (AUDIO[2], "iommu_group")]
    assert [(e["address"], e["reason"]) for e in plan["devices"]] == expected
    plan = binder.plan([GPUS[2]], "vfio-pci", include_iommu_group=False)
    assert [e["address"] for e in plan["devices"]] == [GPUS[2]]
    assert kernel.state()[GPUS[2]] == ("nvidia", None)  # planning changes nothing


def test_foreign_device_in_group_is_refused(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    kernel.add_device("0000:20:00.0", "0x8086", "0x1234", "0x020000", group="10")
    with pytest.raises(BindError, match=r"0000:20:00.0 \(vendor 0x8086.*include_iommu_group: false"):
        binder.plan([GPUS[0]], "vfio-pci")


def test_busy_gpu_is_refused_and_named(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    kernel.add_process(4242, "sglang::schedul", [kernel.dev + "/nvidia3"])
    before = kernel.state()
    with pytest.raises(BindError) as info:
        binder.plan(["all"], "vfio-pci")
    assert "0000:04:00.0 (nvidia): pid 4242 sglang::schedul" in str(info.value)
    assert "force: true" in str(info.value)
    assert kernel.state() == before
    plan = binder.plan(["all"], "vfio-pci", force=True)
    binder.apply(plan)
    assert kernel.state()[GPUS[3]] == ("vfio-pci", "vfio-pci")


def test_vm_holding_vfio_group_is_refused(tmp_path):
    kernel, binder, _loaded = make(tmp_path, driver="vfio-pci")
    kernel.add_process(777, "kvm", [kernel.dev + "/vfio/15"])
    with pytest.raises(BindError, match=r"0000:06:00.0 \(vfio-pci\): pid 777 kvm"):
        binder.plan(["all"], "nvidia")


@pytest.mark.parametrize("op,index,fault", [
    ("drivers_probe", 5, errno.EIO),
    ("unbind", 7, errno.EBUSY),
    ("driver_override", 9, errno.EINVAL),
])
def test_failure_midway_restores_everything(tmp_path, op, index, fault):
    kernel, binder, _loaded = make(tmp_path)
    before = kernel.state()
    kernel.faults[(op, sorted(GPUS + AUDIO)[index])] = fault
    plan = binder.plan(["all"], "vfio-pci")
    with pytest.raises(BindError) as info:
        binder.apply(plan)
    assert kernel.state() == before
    assert "Every touched device is back on its previous driver" in str(info.value)
    assert info.value.devices and all(r["restored"] for r in info.value.devices)


def test_bind_ebusy_after_silent_probe_restores(tmp_path):
    """drivers_probe does nothing for one GPU, the explicit bind then fails with EBUSY."""
    kernel, binder, _loaded = make(tmp_path)
    before = kernel.state()
    kernel.faults[("drivers_probe", GPUS[4])] = "ignore"
    kernel.faults[("bind", GPUS[4])] = errno.EBUSY
    with pytest.raises(BindError, match="Device or resource busy"):
        binder.apply(binder.plan(["all"], "vfio-pci"))
    assert kernel.state() == before
    assert ("bind", GPUS[4], GPUS[4]) in binder.operations


def test_fault_that_persists_through_the_restore_is_reported_not_hidden(tmp_path):
    """One GPU's driver keeps refusing it (probe ignored, bind EIO, every time: the fake kernel's
    ("always", fault)): the move fails, the restore of that GPU fails the same way and is reported as
    such, by address; every other device is back where it was."""
    kernel, binder, _loaded = make(tmp_path)
    before = kernel.state()
    kernel.faults[("drivers_probe", GPUS[4])] = ("always", "ignore")
    kernel.faults[("bind", GPUS[4])] = ("always", errno.EIO)
    with pytest.raises(BindError) as info:
        binder.apply(binder.plan(["all"], "vfio-pci"))
    assert "NOT every device could be restored" in str(info.value)
    report = {r["address"]: r for r in info.value.devices}
    assert report[GPUS[4]]["restored"] is False
    assert "Input/output error" in report[GPUS[4]]["error"]
    assert [a for a, r in report.items() if not r["restored"]] == [GPUS[4]]
    after = kernel.state()
    assert after[GPUS[4]][0] is None  # unbound, and the driver refused it back
    assert {a: s for a, s in after.items() if a != GPUS[4]} == {a: s for a, s in before.items() if a != GPUS[4]}
    # The restore wrote to the device again (the fault did not go away after its first use).
    binds = [e for e in kernel.log if e["op"] == "bind" and e["address"] == GPUS[4]]
    assert [e["result"] for e in binds] == ["EIO", "EIO"]


def test_persistent_fault_from_the_daemon_file(tmp_path):
    """Daemon mode reads faults.json: a one-shot entry is removed after its use, an "always" entry stays."""
    kernel, binder, _loaded = make(tmp_path)
    (tmp_path / "host" / "faults.json").write_text(
        '{"unbind %s": "always EBUSY", "unbind %s": "EIO"}' % (GPUS[0], GPUS[1]))
    for _attempt in range(2):
        with pytest.raises(BindError):
            binder.apply(binder.plan([GPUS[0]], "vfio-pci", include_iommu_group=False))
    with pytest.raises(BindError):
        binder.apply(binder.plan([GPUS[1]], "vfio-pci", include_iommu_group=False))
    binder.apply(binder.plan([GPUS[1]], "vfio-pci", include_iommu_group=False))
    assert kernel.state()[GPUS[1]][0] == "vfio-pci" and kernel.state()[GPUS[0]][0] == "nvidia"
    results = [(e["address"], e["result"]) for e in kernel.log if e["op"] == "unbind"]
    assert results[:3] == [(GPUS[0], "EBUSY"), (GPUS[0], "EBUSY"), (GPUS[1], "EIO")]


def test_silent_probe_then_explicit_bind_succeeds(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    kernel.faults[("drivers_probe", GPUS[1])] = "ignore"
    binder.apply(binder.plan(["all"], "vfio-pci"))
    assert kernel.state()[GPUS[1]] == ("vfio-pci", "vfio-pci")


def test_device_vanishes_midway(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    before = kernel.state()
    kernel.faults[("drivers_probe", GPUS[6])] = "vanish"
    with pytest.raises(BindError) as info:
        binder.apply(binder.plan(["all"], "vfio-pci"))
    after = kernel.state()
    assert GPUS[6] not in after
    assert dict(after) == {a: s for a, s in before.items() if a != GPUS[6]}
    gone = [r for r in info.value.devices if r["address"] == GPUS[6]]
    assert gone and gone[0]["error"] == "vanished from the PCI bus" and not gone[0]["restored"]
    assert "NOT every device could be restored" in str(info.value)


def test_missing_device_refused_before_any_change(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    with pytest.raises(BindError, match=r"0000:99:00.0: no such PCI device.*ls /sys/bus/pci/devices"):
        binder.plan([GPUS[0], "0000:99:00.0"], "vfio-pci")
    with pytest.raises(BindError, match=r"'gpu0' is not a PCI address"):
        binder.plan(["gpu0"], "vfio-pci")
    with pytest.raises(BindError, match=r"driver='amdgpu' is not one of"):
        binder.plan(["all"], "amdgpu")


def test_vfio_module_loaded_when_missing(tmp_path):
    kernel, binder, loaded = make(tmp_path, drivers=("nvidia", "snd_hda_intel"))
    plan = binder.plan(["all"], "vfio-pci")
    assert plan["modules_to_load"] == ["vfio-pci"]
    binder.apply(plan)
    assert loaded == [["modprobe", "vfio-pci"]]
    assert kernel.state()[GPUS[0]] == ("vfio-pci", "vfio-pci")


def test_to_none_leaves_devices_driverless_on_purpose(tmp_path):
    kernel, binder, _loaded = make(tmp_path)
    binder.apply(binder.plan([GPUS[0]], "none"))
    assert kernel.state()[GPUS[0]] == (None, "none")
    assert kernel.state()[AUDIO[0]] == (None, "none")


def test_nvidia_runtime_nodes_and_uvm(tmp_path):
    kernel, binder, loaded = make(tmp_path, modules=())
    import os
    os.unlink(kernel.dev + "/nvidia-uvm")
    with pytest.raises(BindError, match="nvidia-uvm are missing.*nvidia-modprobe is not installed"):
        binder.ensure_nvidia_runtime(nvidia_modprobe=None)
    assert ["modprobe", "nvidia-uvm"] in loaded
    actions = binder.ensure_nvidia_runtime(check_mode=True, nvidia_modprobe="/usr/bin/nvidia-modprobe")
    assert actions[-1].startswith("/usr/bin/nvidia-modprobe -u -c 0")
