# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Move PCI functions between kernel drivers through sysfs (driver_override, unbind, drivers_probe,
bind), verify the result, and put every touched device back on its previous driver when a step
fails. Standard library only; all paths derive from sysfs_root/procfs_root/dev_root.
"""

from __future__ import annotations

import os
import re
import time

from ansible_collections.gpufleet.llm_server.plugins.module_utils.gpu_info import (
    NVIDIA_VENDOR,
    gpu_minor,
    normalize_address,
    pci_device,
    processes_holding,
    scan_pci,
)

TARGETS = ("vfio-pci", "nvidia", "none")
ADDRESS_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
MODULE_FOR_DRIVER = {"vfio-pci": "vfio-pci", "nvidia": "nvidia"}


class BindError(Exception):
    """A refusal (before any change) or a failure (after a full restore attempt)."""

    def __init__(self, message, devices=None):
        super().__init__(message)
        self.devices = devices or []


def sysfs_write(path, value):
    """Write one value the way `echo value > path` does. O_NONBLOCK is ignored by sysfs attributes;
    it makes a write to a FIFO without reader fail at once instead of hanging."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK)
    try:
        os.write(fd, value.encode("ascii") + b"\n")
    finally:
        os.close(fd)


class Binder:
    """One planned move of PCI functions to a driver; `plan()` never changes anything."""

    def __init__(self, sysfs_root="/sys", procfs_root="/proc", dev_root="/dev", write=None, run=None,
                 settle_timeout=10.0, companion_settle=1.0, sleep=time.sleep, clock=time.monotonic):
        self.sysfs_root = sysfs_root
        self.procfs_root = procfs_root
        self.dev_root = dev_root
        self.write = write or sysfs_write
        self.run = run
        self.settle_timeout = settle_timeout
        self.companion_settle = companion_settle
        self.sleep = sleep
        self.clock = clock
        self.operations = []  # (op, address, value) in the order they were written

    # ----------------------------------------------------------------- helpers
    def _dev(self, address):
        return os.path.join(self.sysfs_root, "bus", "pci", "devices", address)

    def _state(self, address):
        info = pci_device(self.sysfs_root, address)
        return None if info is None else (info["driver"], info["driver_override"])

    def _write(self, op, address, path, value):
        self.operations.append((op, address, value))
        self.write(path, value)

    def driver_loaded(self, driver):
        return os.path.isdir(os.path.join(self.sysfs_root, "bus", "pci", "drivers", driver))

    def module_loaded(self, name):
        return os.path.isdir(os.path.join(self.sysfs_root, "module", name.replace("-", "_")))

    def _run(self, argv):
        if self.run is None:
            raise BindError("cannot run %s: no command runner" % " ".join(argv))
        rc, out, err = self.run(argv)
        if rc != 0:
            raise BindError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out or "").strip()[:400]))

    # ----------------------------------------------------------------- planning
    def resolve(self, devices, include_iommu_group=True):
        """Addresses to move, in order, each with its reason ('requested' or 'iommu_group')."""
        if not devices:
            raise BindError("devices is empty: list PCI addresses (0000:01:00.0) or use [all] for every NVIDIA GPU")
        wanted = []
        for entry in devices:
            entry = str(entry).strip().lower()
            if entry == "all":
                gpus = [d["address"] for d in scan_pci(self.sysfs_root) if d["kind"] == "gpu"]
                if not gpus:
                    raise BindError("devices=[all] but no NVIDIA GPU is under %s/bus/pci/devices" % self.sysfs_root)
                wanted.extend(gpus)
                continue
            address = normalize_address(entry)
            if not ADDRESS_RE.match(address):
                raise BindError("devices entry %r is not a PCI address; use the form 0000:01:00.0 (see "
                                "/sys/bus/pci/devices) or 'all'" % entry)
            if pci_device(self.sysfs_root, address) is None:
                raise BindError("devices entry %s: no such PCI device under %s/bus/pci/devices; check the "
                                "address with `ls /sys/bus/pci/devices`" % (address, self.sysfs_root))
            wanted.append(address)
        ordered = {}
        for address in wanted:
            ordered.setdefault(address, "requested")
        if include_iommu_group:
            for address in list(ordered):
                info = pci_device(self.sysfs_root, address)
                for member in info["iommu_group_members"]:
                    if member in ordered:
                        continue
                    other = pci_device(self.sysfs_root, member)
                    if other is None or other["class"].startswith("0x0604"):
                        continue  # bridges stay on pcieport; a vanished member has nothing to move
                    if other["vendor_id"] != NVIDIA_VENDOR:
                        raise BindError(
                            "IOMMU group %s of %s also holds %s (vendor %s, class %s), which is not an NVIDIA "
                            "function; list it in devices explicitly to move it too, or set "
                            "include_iommu_group: false" % (info["iommu_group"], address, member,
                                                            other["vendor_id"], other["class"]))
                    ordered[member] = "iommu_group"
        return sorted(ordered.items())

    @staticmethod
    def desired(kind, target):
        """(wanted driver or '*host*', wanted driver_override)."""
        if target == "vfio-pci":
            return "vfio-pci", "vfio-pci"
        if target == "none":
            return None, "none"
        return ("nvidia" if kind == "gpu" else "*host*"), None

    @staticmethod
    def satisfied(driver, override, want_driver, want_override):
        if override != want_override:
            return False
        if want_driver == "*host*":
            return driver != "vfio-pci"
        return driver == want_driver

    def plan(self, devices, target, include_iommu_group=True, force=False):
        if target not in TARGETS:
            raise BindError("driver=%r is not one of %s" % (target, ", ".join(TARGETS)))
        entries = []
        for address, reason in self.resolve(devices, include_iommu_group):
            info = pci_device(self.sysfs_root, address)
            want_driver, want_override = self.desired(info["kind"], target)
            ok = self.satisfied(info["driver"], info["driver_override"], want_driver, want_override)
            driver_ok = self.satisfied(info["driver"], want_override, want_driver, want_override)
            entries.append({
                "address": address,
                "kind": info["kind"],
                "reason": reason,
                "iommu_group": info["iommu_group"],
                "before": {"driver": info["driver"], "driver_override": info["driver_override"]},
                "want_driver": want_driver,
                "want_override": want_override,
                "action": "none" if ok else ("override" if driver_ok else "rebind"),
            })
        busy = []
        for entry in entries:
            if entry["action"] != "rebind":
                continue
            holders = self.holders(entry)
            entry["processes"] = holders
            if holders:
                busy.append("%s (%s): %s" % (entry["address"], entry["before"]["driver"], ", ".join(
                    "pid %d %s" % (p["pid"], p["name"]) for p in holders)))
        if busy and not force:
            raise BindError("refusing to move device(s) in use: %s. Stop those processes (the LXC, the VM, "
                            "the SGLang service) first, or set force: true." % "; ".join(busy), entries)
        modules = []
        if any(e["action"] == "rebind" for e in entries) and target in MODULE_FOR_DRIVER \
                and not self.driver_loaded(target):
            modules.append(MODULE_FOR_DRIVER[target])
        return {"devices": entries, "modules_to_load": modules}

    def holders(self, entry):
        """Processes holding the device node of its current driver (/dev/nvidiaN, /dev/vfio/GROUP)."""
        driver = entry["before"]["driver"]
        paths = []
        if driver == "nvidia":
            minor = gpu_minor(self.procfs_root, entry["address"])
            if minor is not None:
                paths.append(os.path.join(self.dev_root, "nvidia%d" % minor))
        elif driver == "vfio-pci" and entry["iommu_group"] is not None:
            paths.append(os.path.join(self.dev_root, "vfio", str(entry["iommu_group"])))
        return processes_holding(self.procfs_root, paths) if paths else []

    # ----------------------------------------------------------------- execution
    def _wait(self, predicate, timeout):
        deadline = self.clock() + timeout
        while True:
            if predicate():
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(0.05)

    def _is_there(self, address):
        return os.path.isdir(self._dev(address))

    def apply(self, plan):
        """Execute a plan. Returns the device entries with `after`. On failure restores and raises."""
        changes = [e for e in plan["devices"] if e["action"] != "none"]
        touched = []
        try:
            for module in plan["modules_to_load"]:
                self._run(["modprobe", module])
                if not self._wait(lambda m=module: self.driver_loaded(m), self.settle_timeout):
                    raise BindError("modprobe %s ran but no %s driver appeared under %s/bus/pci/drivers"
                                    % (module, module, self.sysfs_root))
            for entry in changes:
                touched.append(entry)
                if entry["before"]["driver_override"] != entry["want_override"]:
                    self._write("driver_override", entry["address"],
                                os.path.join(self._dev(entry["address"]), "driver_override"),
                                entry["want_override"] or "")
            rebinds = [e for e in changes if e["action"] == "rebind"]
            for entry in rebinds:
                driver = entry["before"]["driver"]
                if driver:
                    self._write("unbind", entry["address"], os.path.join(
                        self.sysfs_root, "bus", "pci", "drivers", driver, "unbind"), entry["address"])
            for entry in rebinds:
                if not self._wait(lambda a=entry["address"]: self._is_there(a) and self._state(a)[0] is None,
                                  self.settle_timeout):
                    raise self._step_error(entry, "unbind")
            for entry in rebinds:
                if entry["want_driver"] is not None:
                    self._write("drivers_probe", entry["address"],
                                os.path.join(self.sysfs_root, "bus", "pci", "drivers_probe"), entry["address"])
            for entry in rebinds:
                self._settle_bound(entry)
            for entry in changes:
                state = self._state(entry["address"])
                if state is None or not self.satisfied(state[0], state[1], entry["want_driver"],
                                                       entry["want_override"]):
                    raise self._step_error(entry, "verify")
        except (OSError, BindError) as exc:
            results = self.restore(touched)
            failed_at = getattr(exc, "filename", None)
            detail = "%s%s" % (exc, (" (%s)" % failed_at) if failed_at and failed_at not in str(exc) else "")
            restored = all(r["restored"] for r in results)
            raise BindError("moving to %s failed: %s. %s" % (
                plan["devices"][0]["want_driver"] if plan["devices"] else "?", detail,
                "Every touched device is back on its previous driver." if restored else
                "NOT every device could be restored; see devices for each one's state."),
                results) from exc
        for entry in plan["devices"]:
            state = self._state(entry["address"])
            entry["after"] = {"driver": state[0], "driver_override": state[1]}
        return plan["devices"]

    def _settle_bound(self, entry):
        address = entry["address"]
        want = entry["want_driver"]
        if want is None:
            return
        if want == "*host*":
            # Companions (HDMI audio) go back to whatever driver claims them; none is acceptable.
            self._wait(lambda: not self._is_there(address) or self._state(address)[0] is not None,
                       self.companion_settle)
            if not self._is_there(address):
                raise self._step_error(entry, "probe")
            return
        if self._wait(lambda: self._is_there(address) and self._state(address)[0] == want,
                      min(self.settle_timeout, 1.0)):
            return
        if not self._is_there(address):
            raise self._step_error(entry, "probe")
        if self._state(address)[0] is None:
            # drivers_probe did not attach it: ask the driver directly (may fail with EBUSY/ENODEV).
            self._write("bind", address, os.path.join(self.sysfs_root, "bus", "pci", "drivers", want, "bind"), address)
        if not self._wait(lambda: self._is_there(address) and self._state(address)[0] == want, self.settle_timeout):
            raise self._step_error(entry, "bind")

    def _step_error(self, entry, step):
        state = self._state(entry["address"])
        if state is None:
            return BindError("%s vanished from the PCI bus during %s" % (entry["address"], step))
        return BindError("%s: after %s it is on driver %s (override %s), expected %s" % (
            entry["address"], step, state[0], state[1],
            "a host driver" if entry["want_driver"] == "*host*" else entry["want_driver"]))

    def restore(self, touched):
        """Put each touched device back on its previous driver and override; per-device report."""
        results = []
        for entry in reversed(touched):
            address = entry["address"]
            prev_driver = entry["before"]["driver"]
            prev_override = entry["before"]["driver_override"]
            result = {"address": address, "kind": entry["kind"], "before": entry["before"], "restored": False}
            try:
                state = self._state(address)
                if state is None:
                    result["error"] = "vanished from the PCI bus"
                    results.append(result)
                    continue
                if state[1] != prev_override:
                    self._write("driver_override", address, os.path.join(self._dev(address), "driver_override"),
                                prev_override or "")
                if state[0] != prev_driver:
                    if state[0]:
                        self._write("unbind", address, os.path.join(
                            self.sysfs_root, "bus", "pci", "drivers", state[0], "unbind"), address)
                        self._wait(lambda: self._state(address) is None or self._state(address)[0] is None,
                                   self.settle_timeout)
                    if prev_driver:
                        self._write("drivers_probe", address,
                                    os.path.join(self.sysfs_root, "bus", "pci", "drivers_probe"), address)
                        if not self._wait(lambda: (self._state(address) or (None,))[0] == prev_driver, 0.5):
                            if (self._state(address) or ("x",))[0] is None:
                                self._write("bind", address, os.path.join(
                                    self.sysfs_root, "bus", "pci", "drivers", prev_driver, "bind"), address)
                            self._wait(lambda: (self._state(address) or (None,))[0] == prev_driver,
                                       self.settle_timeout)
                state = self._state(address)
                result["after"] = None if state is None else {"driver": state[0], "driver_override": state[1]}
                result["restored"] = state is not None and state[0] == prev_driver
                if not result["restored"]:
                    result["error"] = "still on %s" % (state[0] if state else "nothing (vanished)")
            except OSError as exc:
                result["error"] = "restore failed: %s" % exc
            results.append(result)
        return list(reversed(results))

    # ----------------------------------------------------------------- after a move to nvidia
    def ensure_nvidia_runtime(self, check_mode=False, nvidia_modprobe=None):
        """nvidia_uvm loaded and /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidiaN present. Returns
        the actions taken (or that would be taken in check mode)."""
        actions = []
        if not self.module_loaded("nvidia_uvm"):
            actions.append("modprobe nvidia-uvm")
            if not check_mode:
                self._run(["modprobe", "nvidia-uvm"])
        minors = []
        for dev in scan_pci(self.sysfs_root):
            if dev["kind"] == "gpu" and dev["driver"] == "nvidia":
                minor = gpu_minor(self.procfs_root, dev["address"])
                if minor is not None:
                    minors.append(minor)
        needed = ["nvidiactl", "nvidia-uvm"] + ["nvidia%d" % m for m in sorted(minors)]
        missing = [n for n in needed if not os.path.exists(os.path.join(self.dev_root, n))]
        if missing:
            if nvidia_modprobe is None:
                raise BindError("device nodes %s are missing under %s and nvidia-modprobe is not installed; "
                                "install the driver's nvidia-modprobe (role gpufleet.llm_server.nvidia_driver) "
                                "or create them with udev" % (", ".join(missing), self.dev_root))
            argv = [nvidia_modprobe, "-u", "-c", "0"] + [x for m in minors for x in ("-c", str(m))]
            actions.append(" ".join(argv))
            if not check_mode:
                self._run(argv)
                still = [n for n in needed if not os.path.exists(os.path.join(self.dev_root, n))]
                if still:
                    raise BindError("%s ran but %s are still missing under %s" % (argv[0], ", ".join(still),
                                                                                  self.dev_root))
        return actions


def persist_file(persist_dir, address):
    """driverctl's own layout: /etc/driverctl.d/pci-<address> holding the driver name."""
    return os.path.join(persist_dir, "pci-%s" % address)


def persist_wanted(target, kind):
    """Content of the driverctl override file, or None when the file must be absent."""
    if target == "vfio-pci":
        return "vfio-pci"
    if target == "none":
        return "none"
    return None


__all__ = ["BindError", "Binder", "TARGETS", "persist_file", "persist_wanted", "sysfs_write"]
