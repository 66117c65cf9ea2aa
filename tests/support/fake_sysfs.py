"""TEST DOUBLE for the Linux kernel's PCI sysfs (plus the procfs/devfs bits the GPU modules read).

Rebinding real GPUs cannot run on the development/CI machines (no GPUs) nor on the shared GPU test
host (read-only there), so this file stands in for the kernel. It builds a directory tree laid out
like /sys, /proc and /dev of a machine with N NVIDIA GPUs (each with its HDMI audio function in the
same IOMMU group) and emulates what the kernel does when a control file is written:

- ``drivers/<drv>/unbind``: drops the ``driver`` link (ENODEV when not bound to <drv>);
- ``drivers/<drv>/bind``: attaches the driver, honouring ``driver_override`` (EBUSY when already
  bound, ENODEV when the driver does not match);
- ``drivers_probe``: attaches the override driver when set (nothing when that driver is not
  loaded, e.g. ``none``), else the first loaded driver whose id table matches
  (nvidia: NVIDIA display class; snd_hda_intel: audio class; vfio-pci: none, override only);
- ``driver_override``: stored as written (``(null)`` when cleared);
- binding nvidia creates /proc/driver/nvidia/gpus/<addr>/information and /dev/nvidiaN.

Fault injection (``faults``, or in daemon mode the file <base>/faults.json): ``{(op, address): errno_number | "vanish" | "ignore"}`` with op one of
unbind, bind, drivers_probe, driver_override. ``"vanish"`` removes the device (hot-unplug),
``"ignore"`` accepts the write and does nothing (a driver whose probe silently fails). A fault is
used once, unless it is written ``("always", fault)`` (faults.json: ``"always EIO"``): then every
write of that op to that device fails the same way, the restore after a failed move included (a
device whose driver keeps refusing it, issue 34).

Two ways to drive it:
- in-process: pass ``FakeKernel.write`` as the writer of pci_bind.Binder (unit tests);
- as a daemon: ``fake_sysfs.py serve`` turns bind/unbind/drivers_probe into FIFOs and applies
  every line written to them (integration tests and the Molecule scenario, where the real module
  writes to the tree with plain open()/write()). Every applied operation is appended as a JSON
  line to the journal file, which the tests read to assert the order of operations.

Standard library only (it is copied into the Molecule container and run by its Python 3.11).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import signal
import stat
import sys
import threading
import time

NVIDIA = "0x10de"
GPU_CLASS = "0x030200"
AUDIO_CLASS = "0x040300"
PROBE_ORDER = ("nvidia", "snd_hda_intel", "vfio-pci")
OPEN_VERSION = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                "(dvs-builder@U22-I3-AE18-23-3)  Tue Nov  4 00:00:00 UTC 2025\n"
                "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
PROPRIETARY_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  "
                       "(dvs-builder@U22-I3-AE18-23-3)  Tue Nov  4 00:00:00 UTC 2025\n")


def _write_file(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _read(path):
    with open(path, "r", encoding="utf-8") as handle:
        return handle.read().strip()


def _symlink(target, link):
    """Relative symlink like sysfs uses."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.islink(link):
        os.unlink(link)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


class FakeKernel:
    """See the module docstring. Roots: <base>/sys, <base>/proc, <base>/dev."""

    def __init__(self, base, journal=None):
        self.base = os.path.abspath(base)
        self.sys = os.path.join(self.base, "sys")
        self.proc = os.path.join(self.base, "proc")
        self.dev = os.path.join(self.base, "dev")
        self.journal = journal
        self.faults = {}
        self.log = []
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ building
    def build(self, gpus=8, driver="nvidia", audio=True, device_id="0x2bb1", flavor="open",
              drivers=("nvidia", "vfio-pci", "snd_hda_intel"),
              modules=("nvidia_uvm", "nvidia_drm", "nvidia_modeset"), iommu=True):
        """N GPUs at 0000:<i+1>:00.0 (+ audio .1), group 10+i, NUMA node i//4. `driver` is where the
        GPUs start (nvidia, vfio-pci or None); audio starts on snd_hda_intel (vfio-pci when GPUs do)."""
        for sub in ("bus/pci/devices", "bus/pci/drivers", "module", "kernel/iommu_groups", "devices/pci0000:00"):
            os.makedirs(os.path.join(self.sys, sub), exist_ok=True)
        os.makedirs(self.dev, exist_ok=True)
        _write_file(os.path.join(self.sys, "bus", "pci", "drivers_probe"), "")
        for name in drivers:
            self.load_module(name)
        for name in modules:
            self._module_dir(name)
        if "nvidia" in drivers:
            _write_file(os.path.join(self.proc, "driver", "nvidia", "version"),
                        OPEN_VERSION if flavor == "open" else PROPRIETARY_VERSION)
            _write_file(os.path.join(self.sys, "module", "nvidia", "version"), "580.159.04\n")
            for node in ("nvidiactl", "nvidia-uvm"):
                _write_file(os.path.join(self.dev, node), "")
        for i in range(gpus):
            bus = i + 1
            gpu = "0000:%02x:00.0" % bus
            group = str(10 + i) if iommu else None
            self.add_device(gpu, NVIDIA, device_id, GPU_CLASS, group, numa=i // 4)
            if audio:
                self.add_device("0000:%02x:00.1" % bus, NVIDIA, "0x22e8", AUDIO_CLASS, group, numa=i // 4)
            if driver:
                override = "vfio-pci" if driver == "vfio-pci" else None
                self._set_override(gpu, override)
                self._bind(gpu, driver)
                if audio:
                    self._set_override("0000:%02x:00.1" % bus, override)
                    self._bind("0000:%02x:00.1" % bus, "vfio-pci" if driver == "vfio-pci" else "snd_hda_intel")
        return self

    def _module_dir(self, name):
        moddir = os.path.join(self.sys, "module", name.replace("-", "_"))
        _write_file(os.path.join(moddir, "initstate"), "live\n")
        return moddir

    def load_module(self, name):
        """What `modprobe name` does for our drivers: module dir + PCI driver dir with bind/unbind."""
        self._module_dir(name)
        drv = os.path.join(self.sys, "bus", "pci", "drivers", name)
        os.makedirs(drv, exist_ok=True)
        for control in ("bind", "unbind", "new_id", "remove_id"):
            if not os.path.exists(os.path.join(drv, control)):
                _write_file(os.path.join(drv, control), "")

    def add_device(self, address, vendor, device, pci_class, group=None, numa=0):
        real = os.path.join(self.sys, "devices", "pci0000:00", address)
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class),
                            ("numa_node", str(numa)), ("driver_override", "(null)"),
                            ("subsystem_vendor", vendor)):
            _write_file(os.path.join(real, name), value + "\n")
        _symlink(real, os.path.join(self.sys, "bus", "pci", "devices", address))
        if group is not None:
            gdir = os.path.join(self.sys, "kernel", "iommu_groups", group)
            _symlink(gdir, os.path.join(real, "iommu_group"))
            _symlink(real, os.path.join(gdir, "devices", address))
            _write_file(os.path.join(self.dev, "vfio", group), "")

    def add_process(self, pid, comm, holds):
        """A process with open file descriptors on `holds` (absolute paths, e.g. <dev>/nvidia0)."""
        pdir = os.path.join(self.proc, str(pid))
        _write_file(os.path.join(pdir, "comm"), comm + "\n")
        os.makedirs(os.path.join(pdir, "fd"), exist_ok=True)
        for number, target in enumerate(holds, start=3):
            os.symlink(target, os.path.join(pdir, "fd", str(number)))

    # ------------------------------------------------------------------ state
    def devdir(self, address):
        return os.path.join(self.sys, "bus", "pci", "devices", address)

    def exists(self, address):
        return os.path.isdir(self.devdir(address))

    def driver_of(self, address):
        link = os.path.join(self.devdir(address), "driver")
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else None

    def override_of(self, address):
        value = _read(os.path.join(self.devdir(address), "driver_override"))
        return None if value in ("", "(null)") else value

    def state(self):
        names = sorted(os.listdir(os.path.join(self.sys, "bus", "pci", "devices")))
        return {a: (self.driver_of(a), self.override_of(a)) for a in names}

    def _set_override(self, address, value):
        _write_file(os.path.join(self.devdir(address), "driver_override"), (value or "(null)") + "\n")

    def _matches(self, driver, address):
        override = self.override_of(address)
        if override is not None:
            return override == driver
        vendor = _read(os.path.join(self.devdir(address), "vendor"))
        pci_class = _read(os.path.join(self.devdir(address), "class"))
        if driver == "nvidia":
            return vendor == NVIDIA and pci_class.startswith("0x03")
        if driver == "snd_hda_intel":
            return pci_class.startswith("0x0403")
        return False

    def _bind(self, address, driver):
        real = os.path.realpath(self.devdir(address))
        drv = os.path.join(self.sys, "bus", "pci", "drivers", driver)
        _symlink(drv, os.path.join(real, "driver"))
        _symlink(real, os.path.join(drv, address))
        if driver == "nvidia":
            minor = int(address.split(":")[1], 16) - 1  # GPU i sits on bus i+1
            _write_file(os.path.join(self.proc, "driver", "nvidia", "gpus", address, "information"),
                        "Model: \t\t NVIDIA RTX PRO 6000 Blackwell Server Edition\nIRQ:   \t\t 100\n"
                        "GPU UUID: \t GPU-00000000-0000-0000-0000-%012d\nDevice Minor: \t %d\n"
                        "Bus Location: \t %s\n" % (minor, minor, address))
            _write_file(os.path.join(self.dev, "nvidia%d" % minor), "")

    def _unbind(self, address):
        driver = self.driver_of(address)
        real = os.path.realpath(self.devdir(address))
        os.unlink(os.path.join(real, "driver"))
        if driver:
            link = os.path.join(self.sys, "bus", "pci", "drivers", driver, address)
            if os.path.islink(link):
                os.unlink(link)
        if driver == "nvidia":
            shutil.rmtree(os.path.join(self.proc, "driver", "nvidia", "gpus", address), ignore_errors=True)

    def vanish(self, address):
        """Hot-unplug: the device and every link to it disappear."""
        real = os.path.realpath(self.devdir(address))
        if self.driver_of(address):
            self._unbind(address)
        group = os.path.join(real, "iommu_group")
        if os.path.islink(group):
            member = os.path.join(os.path.realpath(group), "devices", address)
            if os.path.islink(member):
                os.unlink(member)
        os.unlink(self.devdir(address))
        shutil.rmtree(real)

    # ------------------------------------------------------------------ the kernel's side of a write
    def _record(self, op, address, value, result):
        entry = {"t": time.time(), "actor": "kernel", "op": op, "address": address, "value": value,
                 "result": result}
        self.log.append(entry)
        if self.journal:
            with open(self.journal, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")

    def write(self, path, value):
        """Apply `value` written to `path` like the kernel would; raises OSError like it."""
        with self.lock:
            return self._write(path, value)

    def _write(self, path, value):
        value = value.strip()
        real = os.path.realpath(path)
        rel = os.path.relpath(real, os.path.realpath(self.sys)).split(os.sep)
        if rel[-1] == "driver_override":
            address = rel[-2]
            op = "driver_override"
        elif rel[-1] in ("bind", "unbind") and rel[:3] == ["bus", "pci", "drivers"]:
            op, address = rel[-1], value
        elif rel == ["bus", "pci", "drivers_probe"]:
            op, address = "drivers_probe", value
        else:
            raise OSError(errno.EACCES, "fake kernel: %s is not a writable control file" % path, path)
        fault = self.faults.get((op, address))
        if isinstance(fault, tuple) and fault[0] == "always":
            fault = fault[1]
        else:
            self.faults.pop((op, address), None)
        if fault is None:
            fault = self._file_fault(op, address)
        if fault == "vanish":
            if self.exists(address):
                self.vanish(address)
            self._record(op, address, value, "vanished")
            raise OSError(errno.ENODEV, "No such device", path)
        if isinstance(fault, int):
            self._record(op, address, value, errno.errorcode[fault])
            raise OSError(fault, os.strerror(fault), path)
        if fault == "ignore":
            self._record(op, address, value, "ignored")
            return
        if not self.exists(address):
            self._record(op, address, value, "ENODEV")
            raise OSError(errno.ENODEV, "No such device", path)
        if op == "driver_override":
            self._set_override(address, value or None)
        elif op == "unbind":
            if self.driver_of(address) != rel[3]:
                self._record(op, address, value, "ENODEV")
                raise OSError(errno.ENODEV, "No such device", path)
            self._unbind(address)
        elif op == "bind":
            if self.driver_of(address) is not None:
                self._record(op, address, value, "EBUSY")
                raise OSError(errno.EBUSY, "Device or resource busy", path)
            if not self._matches(rel[3], address):
                self._record(op, address, value, "ENODEV")
                raise OSError(errno.ENODEV, "No such device", path)
            self._bind(address, rel[3])
        else:  # drivers_probe
            if self.driver_of(address) is None:
                loaded = [d for d in PROBE_ORDER
                          if os.path.isdir(os.path.join(self.sys, "bus", "pci", "drivers", d))]
                for driver in loaded:
                    if self._matches(driver, address):
                        self._bind(address, driver)
                        break
        self._record(op, address, value, "ok:%s" % self.driver_of(address))
        return None

    def _file_fault(self, op, address):
        """Daemon mode: faults from <base>/faults.json, {"<op> <address>": "EIO"|"vanish"|"ignore"},
        each used once (the file is rewritten without it), or "always EIO" (kept: every such write fails)."""
        path = os.path.join(self.base, "faults.json")
        try:
            with open(path, "r", encoding="utf-8") as handle:
                faults = json.load(handle)
        except (OSError, ValueError):
            return None
        fault = faults.get("%s %s" % (op, address))
        if fault is None:
            return None
        if fault.startswith("always "):
            fault = fault[len("always "):]
        else:
            del faults["%s %s" % (op, address)]
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(faults, handle)
        return getattr(errno, fault) if fault.startswith("E") else fault

    # ------------------------------------------------------------------ daemon mode
    def control_files(self):
        files = [os.path.join(self.sys, "bus", "pci", "drivers_probe")]
        drivers = os.path.join(self.sys, "bus", "pci", "drivers")
        for name in sorted(os.listdir(drivers)):
            files += [os.path.join(drivers, name, "bind"), os.path.join(drivers, name, "unbind")]
        return files

    def serve(self, ready_file=None, stop=None):
        """Replace control files by FIFOs and apply each line written to them until `stop` is set."""
        stop = stop or threading.Event()
        threads = []
        for path in self.control_files():
            if not stat.S_ISFIFO(os.stat(path).st_mode):
                os.unlink(path)
                os.mkfifo(path, 0o600)
            thread = threading.Thread(target=self._pump, args=(path, stop), daemon=True)
            thread.start()
            threads.append(thread)
        if ready_file:
            _write_file(ready_file, "%d\n" % os.getpid())
        stop.wait()

    def _pump(self, path, stop):
        # O_RDWR keeps a writer open ourselves: writers never see "no reader" and we never see EOF.
        fd = os.open(path, os.O_RDWR)
        buffer = b""
        while not stop.is_set():
            chunk = os.read(fd, 4096)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    self.write(path, line.decode("ascii", "replace"))
                except OSError as exc:
                    sys.stderr.write("fake kernel: write %r to %s: %s\n" % (line, path, exc))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fake kernel PCI sysfs (a TEST DOUBLE; see the docstring)")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="create the tree under BASE/{sys,proc,dev}")
    build.add_argument("base")
    build.add_argument("--gpus", type=int, default=8)
    build.add_argument("--driver", default="nvidia", choices=("nvidia", "vfio-pci", "none"))
    build.add_argument("--flavor", default="open", choices=("open", "proprietary"))
    build.add_argument("--no-audio", action="store_true")
    serve = sub.add_parser("serve", help="emulate the kernel on the tree's control files (FIFOs)")
    serve.add_argument("base")
    serve.add_argument("--journal", help="append every applied operation as a JSON line")
    serve.add_argument("--ready-file")
    args = parser.parse_args(argv)
    if args.command == "build":
        kernel = FakeKernel(args.base)
        if os.path.exists(kernel.base):
            shutil.rmtree(kernel.base)
        kernel.build(gpus=args.gpus, driver=None if args.driver == "none" else args.driver,
                     flavor=args.flavor, audio=not args.no_audio)
        return 0
    kernel = FakeKernel(args.base, journal=args.journal)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    kernel.serve(ready_file=args.ready_file, stop=stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
