"""Run the real modules, each as a one-task play on localhost (tests/support/ansible_harness.py run_module),
against a fake kernel running as a separate process.

tests/support/fake_sysfs.py `serve` is a TEST DOUBLE for the kernel (see its docstring): its control
files are FIFOs and a daemon applies each write the way the kernel does, so the modules write with
plain open()/write() exactly as on /sys. Nothing here touches the machine's real /sys.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from support.ansible_harness import run_module
from support.fake_sysfs import FakeKernel

ROOT = pathlib.Path(__file__).resolve().parents[3]
FAKE = ROOT / "tests" / "support" / "fake_sysfs.py"
GPUS = ["0000:%02x:00.0" % (i + 1) for i in range(8)]
AUDIO = ["0000:%02x:00.1" % (i + 1) for i in range(8)]


@pytest.fixture()
def kernel(tmp_path):
    base = tmp_path / "host"
    subprocess.run([sys.executable, str(FAKE), "build", str(base)], check=True)
    journal = tmp_path / "journal.jsonl"
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(FAKE), "serve", str(base), "--journal", str(journal),
                             "--ready-file", str(ready)])
    deadline = time.time() + 20
    while not ready.exists():
        assert proc.poll() is None, "fake kernel daemon exited early"
        assert time.time() < deadline, "fake kernel daemon not ready after 20 s"
        time.sleep(0.05)
    fake = FakeKernel(str(base), journal=str(journal))
    yield fake
    proc.terminate()
    proc.wait(timeout=10)


def ansible(fake, module, args, check=False, diff=False):
    """The module's result, run on localhost through tests/support/ansible_harness.py (files in the test's tmp_path,
    the directory above the fake kernel's tree)."""
    run = run_module(pathlib.Path(fake.base).parent, "gpufleet.llm_server." + module, args, check=check, diff=diff,
                     timeout=120)
    assert run.output, "no JSON from %s\nstdout: %s\nstderr: %s" % (module, run.stdout, run.stderr)
    return run.result


def roots(fake):
    return {"sysfs_root": fake.sys, "procfs_root": fake.proc, "dev_root": fake.dev}


def journal_ops(fake):
    with open(fake.journal, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_round_trip_vfio_and_back(kernel):
    args = dict(roots(kernel), devices=["all"], driver="vfio-pci", settle_timeout=5)
    planned = ansible(kernel, "pci_driver_bind", args, check=True, diff=True)
    assert planned["changed"] is True and not os.path.exists(kernel.journal)  # check mode wrote nothing
    assert "0000:01:00.0 (gpu): driver=vfio-pci override=vfio-pci" in planned["diff"]["after"]
    assert "0000:01:00.0 (gpu): driver=nvidia override=None" in planned["diff"]["before"]

    moved = ansible(kernel, "pci_driver_bind", args)
    assert moved.get("failed") is not True, moved.get("msg")
    assert moved["changed"] is True
    assert dict(kernel.state()) == {a: ("vfio-pci", "vfio-pci") for a in GPUS + AUDIO}
    ops = [(e["op"], e["result"]) for e in journal_ops(kernel)]
    assert [o for o, _r in ops] == ["unbind"] * 16 + ["drivers_probe"] * 16  # overrides are plain files
    assert all(r == "ok:vfio-pci" for o, r in ops if o == "drivers_probe")

    again = ansible(kernel, "pci_driver_bind", args)
    assert again["changed"] is False and again["operations"] == []

    facts = ansible(kernel, "gpu_info", dict(roots(kernel), probe="sysfs", read_kernel_log=False))
    info = facts["ansible_facts"]["gpu_info"]
    assert info["vfio_bound_count"] == 8 and info["gpu_count"] == 0 and info["diagnosis"] == []

    back = ansible(kernel, "pci_driver_bind", dict(args, driver="nvidia"))
    assert back.get("failed") is not True, back.get("msg")
    state = kernel.state()
    assert {state[a] for a in GPUS} == {("nvidia", None)} and {state[a] for a in AUDIO} == {("snd_hda_intel", None)}
    assert back["modules_loaded"] == []  # nvidia_uvm loaded, device nodes present in the tree
    facts = ansible(kernel, "gpu_info", dict(roots(kernel), probe="sysfs", read_kernel_log=False))
    assert facts["gpu_info"]["nvidia_bound_count"] == 8 and facts["gpu_info"]["module_flavor"] == "open"


def test_busy_gpu_refused_through_ansible(kernel):
    kernel.add_process(5150, "sglang", [os.path.join(kernel.dev, "nvidia0")])
    result = ansible(kernel, "pci_driver_bind", dict(roots(kernel), devices=["all"], driver="vfio-pci"))
    assert result["failed"] is True
    assert "0000:01:00.0 (nvidia): pid 5150 sglang" in result["msg"]
    assert not os.path.exists(kernel.journal)


def test_missing_device_refused_before_any_write(kernel):
    kernel.vanish("0000:08:00.0")
    result = ansible(kernel, "pci_driver_bind", dict(roots(kernel), devices=GPUS, driver="vfio-pci"))
    assert result["failed"] is True and "0000:08:00.0: no such PCI device" in result["msg"]
    assert not os.path.exists(kernel.journal)


def test_device_vanishing_midway_restores_the_others(kernel):
    """The daemon hot-unplugs 0000:05:00.0 when it is probed: every other device goes back to nvidia."""
    before = kernel.state()
    with open(os.path.join(kernel.base, "faults.json"), "w", encoding="utf-8") as handle:
        json.dump({"drivers_probe 0000:05:00.0": "vanish"}, handle)
    result = ansible(kernel, "pci_driver_bind", dict(roots(kernel), devices=["all"], driver="vfio-pci", settle_timeout=5))
    assert result["failed"] is True
    assert "0000:05:00.0 vanished from the PCI bus" in result["msg"]
    after = kernel.state()
    assert after == {a: s for a, s in before.items() if a != "0000:05:00.0"}
    gone = [d for d in result["devices"] if d["address"] == "0000:05:00.0"]
    assert gone[0]["restored"] is False and gone[0]["error"] == "vanished from the PCI bus"
    assert all(d["restored"] for d in result["devices"] if d["address"] != "0000:05:00.0")


def test_bad_input_errors(kernel):
    result = ansible(kernel, "pci_driver_bind", dict(roots(kernel), devices=["all"], driver="vfio-pci", settle_timeout=0))
    assert result["failed"] is True and "settle_timeout=0.0 must be a positive" in result["msg"]
    result = ansible(kernel, "gpu_info", {"sysfs_root": "/nonexistent"})
    assert result["failed"] is True and "sysfs_root=/nonexistent has no bus/" in result["msg"]


def test_persist_writes_and_removes_driverctl_files(kernel, tmp_path):
    persist_dir = tmp_path / "driverctl.d"
    args = dict(roots(kernel), devices=[GPUS[0]], driver="vfio-pci", persist=True, persist_dir=str(persist_dir))
    result = ansible(kernel, "pci_driver_bind", args)
    assert result.get("failed") is not True, result.get("msg")
    assert sorted(os.listdir(persist_dir)) == ["pci-0000:01:00.0", "pci-0000:01:00.1"]
    assert (persist_dir / "pci-0000:01:00.0").read_text(encoding="utf-8") == "vfio-pci\n"
    warned = any("driverctl is not installed" in w for w in result.get("warnings", []))
    assert warned is (shutil.which("driverctl") is None)
    again = ansible(kernel, "pci_driver_bind", args)
    assert again["changed"] is False and again["persisted"] == []
    back = ansible(kernel, "pci_driver_bind", dict(args, driver="nvidia"))
    assert back["changed"] is True and os.listdir(persist_dir) == []
