# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only view of NVIDIA GPUs: PCI functions from sysfs, driver state from procfs, per-GPU
details from NVML (nvidia-ml-py), else `nvidia-smi`, else sysfs alone.

Standard library only (runs on the target's system Python). Every path is built from the
`sysfs_root`, `procfs_root` and `dev_root` arguments so tests can point them at a tree.
"""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import os
import re

NVIDIA_VENDOR = "0x10de"
MODULES = ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "vfio_pci")
PROBES = ("auto", "nvml", "nvidia-smi", "sysfs")

OPEN_REQUIRED_RE = re.compile(r"requires use of the NVIDIA open kernel modules", re.I)
VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")
FIX_OPEN = (
    "Install the open kernel module flavour of the same driver branch (Ubuntu: "
    "apt install nvidia-driver-<branch>-open or nvidia-dkms-<branch>-open; NVIDIA's repository: "
    "apt install nvidia-open), remove the proprietary one, then reboot (or rmmod the nvidia modules "
    "and modprobe nvidia). Blackwell and newer GPUs only run with the open module."
)


class GpuInfoError(Exception):
    """A probe that was explicitly requested could not run."""


def _read(path, default=None):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return default


def _link_name(path):
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def normalize_address(address):
    """'00000000:01:00.0' (NVML) or '01:00.0' -> '0000:01:00.0', lower case."""
    address = str(address).strip().lower()
    parts = address.split(":")
    if len(parts) == 2:
        parts.insert(0, "0000")
    if len(parts) != 3:
        return address
    domain = parts[0][-4:].rjust(4, "0")
    return "%s:%s:%s" % (domain, parts[1], parts[2])


def parse_override(value):
    """driver_override reads '(null)' (or empty) when unset."""
    if value is None:
        return None
    value = value.strip()
    if not value or value == "(null)":
        return None
    return value


def device_kind(pci_class):
    """Display (0x03xxxx) -> gpu, audio (0x0403xx) -> audio, anything else -> other."""
    pci_class = (pci_class or "").lower()
    if pci_class.startswith("0x03"):
        return "gpu"
    if pci_class.startswith("0x0403"):
        return "audio"
    return "other"


def pci_device(sysfs_root, address):
    """One PCI function's sysfs facts, or None when it is gone."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices", address)
    if not os.path.isdir(base):
        return None
    group = _link_name(os.path.join(base, "iommu_group"))
    members = []
    if group is not None:
        try:
            members = sorted(os.listdir(os.path.join(sysfs_root, "kernel", "iommu_groups", group, "devices")))
        except OSError:
            members = []
    numa = _read(os.path.join(base, "numa_node"))
    try:
        numa_node = int(numa) if numa is not None and int(numa) >= 0 else None
    except ValueError:
        numa_node = None
    pci_class = _read(os.path.join(base, "class"), "")
    return {
        "address": address,
        "vendor_id": (_read(os.path.join(base, "vendor"), "") or "").lower(),
        "device_id": (_read(os.path.join(base, "device"), "") or "").lower(),
        "class": pci_class.lower(),
        "kind": device_kind(pci_class),
        "driver": _link_name(os.path.join(base, "driver")),
        "driver_override": parse_override(_read(os.path.join(base, "driver_override"))),
        "iommu_group": int(group) if group is not None and group.isdigit() else None,
        "iommu_group_members": members,
        "numa_node": numa_node,
    }


def scan_pci(sysfs_root, vendor=NVIDIA_VENDOR):
    """Every PCI function of `vendor` (all functions when vendor is None), sorted by address."""
    devices_dir = os.path.join(sysfs_root, "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(devices_dir))
    except OSError:
        return []
    found = []
    for name in names:
        info = pci_device(sysfs_root, name)
        if info is None:
            continue
        if vendor is None or info["vendor_id"] == vendor:
            found.append(info)
    return found


def loaded_modules(sysfs_root, procfs_root, names=MODULES):
    """{name: bool}: /proc/modules when readable, else /sys/module/<name>/initstate (or a
    built-in's /sys/module/<name> directory)."""
    listed = _read(os.path.join(procfs_root, "modules"))
    result = {}
    proc_names = None
    if listed is not None:
        proc_names = {line.split()[0] for line in listed.splitlines() if line.strip()}
    for name in names:
        moddir = os.path.join(sysfs_root, "module", name)
        state = _read(os.path.join(moddir, "initstate"))
        if proc_names is not None and name in proc_names:
            result[name] = True
        elif state is not None:
            result[name] = state == "live"
        else:
            # A built-in module has a /sys/module directory without initstate.
            result[name] = os.path.isdir(moddir)
    return result


def driver_version_and_flavor(sysfs_root, procfs_root):
    """(version, flavor, source) from /proc/driver/nvidia/version, else /sys/module/nvidia/version."""
    text = _read(os.path.join(procfs_root, "driver", "nvidia", "version"))
    if text:
        first = text.splitlines()[0]
        match = VERSION_RE.search(first)
        version = match.group(1) if match else None
        flavor = "open" if "open kernel module" in first.lower() else "proprietary"
        return version, flavor, "proc"
    version = _read(os.path.join(sysfs_root, "module", "nvidia", "version"))
    return version or None, None, None


def _modinfo_license(blob):
    match = re.search(rb"(?:^|\x00)license=([^\x00]*)", blob)
    return match.group(1).decode("ascii", "replace") if match else None


def module_file_license(path):
    """license= of a kernel module file (.ko, .ko.xz, .ko.gz; .ko.zst needs `modinfo`)."""
    opener = None
    if path.endswith(".ko"):
        opener = open
    elif path.endswith(".ko.xz"):
        opener = lzma.open
    elif path.endswith(".ko.gz"):
        opener = gzip.open
    if opener is None:
        return None
    try:
        with opener(path, "rb") as handle:
            return _modinfo_license(handle.read())
    except (OSError, lzma.LZMAError, EOFError):
        return None


def flavor_from_license(license_text):
    """Open module: 'Dual MIT/GPL'; proprietary: 'NVIDIA'."""
    if not license_text:
        return None
    return "open" if "GPL" in license_text or "MIT" in license_text else "proprietary"


def find_module_files(modules_root, kernel_release, name="nvidia"):
    base = os.path.join(modules_root, kernel_release)
    found = []
    for dirpath, _dirs, files in os.walk(base):
        for filename in files:
            if filename.split(".ko")[0] == name and ".ko" in filename:
                found.append(os.path.join(dirpath, filename))
    return sorted(found)


def parse_kernel_log(text):
    return bool(text and OPEN_REQUIRED_RE.search(text))


# --------------------------------------------------------------------------- process discovery
def gpu_minor(procfs_root, address):
    """'Device Minor' from /proc/driver/nvidia/gpus/<addr>/information (only when nvidia serves it)."""
    text = _read(os.path.join(procfs_root, "driver", "nvidia", "gpus", address, "information"))
    if not text:
        return None
    match = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
    return int(match.group(1)) if match else None


def nvidia_proc_information(procfs_root, address):
    text = _read(os.path.join(procfs_root, "driver", "nvidia", "gpus", address, "information"))
    result = {}
    if not text:
        return result
    for line in text.splitlines():
        key, _sep, value = line.partition(":")
        result[key.strip()] = value.strip()
    return result


def processes_holding(procfs_root, targets):
    """[{pid, name}] of processes with an open file descriptor on one of `targets` (paths)."""
    targets = set(targets)
    found = []
    try:
        pids = [p for p in os.listdir(procfs_root) if p.isdigit()]
    except OSError:
        return found
    for pid in sorted(pids, key=int):
        fd_dir = os.path.join(procfs_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in targets:
                found.append({"pid": int(pid), "name": _read(os.path.join(procfs_root, pid, "comm"), "?"),
                              "used_memory_mib": None})
                break
    return found


# --------------------------------------------------------------------------- NVML / nvidia-smi
def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def probe_nvml(procfs_root, pynvml=None):
    """{address: details}, driver_version via NVML. Raises GpuInfoError when NVML is unusable."""
    if pynvml is None:
        try:
            import pynvml  # pylint: disable=import-outside-toplevel
        except ImportError as exc:
            raise GpuInfoError("nvidia-ml-py (pynvml) is not importable: %s" % exc) from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pylint: disable=broad-except  # NVMLError subclasses vary by version
        raise GpuInfoError("NVML init failed: %s" % exc) from exc
    try:
        driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        details = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            address = normalize_address(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability = "%d.%d" % (major, minor)
            except Exception:  # pylint: disable=broad-except
                capability = None
            try:
                persistence = bool(pynvml.nvmlDeviceGetPersistenceMode(handle))
            except Exception:  # pylint: disable=broad-except
                persistence = None
            processes = []
            seen = set()
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    running = getattr(pynvml, getter)(handle)
                except Exception:  # pylint: disable=broad-except
                    running = []
                for proc in running:
                    if proc.pid in seen:
                        continue
                    seen.add(proc.pid)
                    used = getattr(proc, "usedGpuMemory", None)
                    processes.append({
                        "pid": int(proc.pid),
                        "name": _read(os.path.join(procfs_root, str(proc.pid), "comm"), "?"),
                        "used_memory_mib": int(used) // (1024 * 1024) if isinstance(used, int) else None,
                    })
            details[address] = {
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "compute_capability": capability,
                "memory_total_mib": int(memory.total) // (1024 * 1024),
                "memory_used_mib": int(memory.used) // (1024 * 1024),
                "memory_free_mib": int(memory.free) // (1024 * 1024),
                "persistence_mode": persistence,
                "processes": processes,
            }
        return details, driver_version
    except GpuInfoError:
        raise
    except Exception as exc:  # pylint: disable=broad-except
        raise GpuInfoError("NVML query failed: %s" % exc) from exc
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # pylint: disable=broad-except
            pass


SMI_GPU_FIELDS = ("pci.bus_id", "name", "uuid", "compute_cap", "memory.total", "memory.used",
                  "memory.free", "persistence_mode", "driver_version")
SMI_APP_FIELDS = ("gpu_bus_id", "pid", "process_name", "used_memory")
NO_DEVICES = "No devices were found"


def _int_or_none(value):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def parse_smi_gpus(text):
    details = {}
    driver_version = None
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) < len(SMI_GPU_FIELDS):
            continue
        row = [c.strip() for c in row]
        address = normalize_address(row[0])
        capability = row[3] if re.match(r"^\d+\.\d+$", row[3]) else None
        details[address] = {
            "name": row[1],
            "uuid": row[2],
            "compute_capability": capability,
            "memory_total_mib": _int_or_none(row[4]),
            "memory_used_mib": _int_or_none(row[5]),
            "memory_free_mib": _int_or_none(row[6]),
            "persistence_mode": {"enabled": True, "disabled": False}.get(row[7].lower()),
            "processes": [],
        }
        driver_version = row[8] or driver_version
    return details, driver_version


def parse_smi_apps(text, details):
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) < len(SMI_APP_FIELDS):
            continue
        row = [c.strip() for c in row]
        address = normalize_address(row[0])
        if address in details and row[1].isdigit():
            details[address]["processes"].append({
                "pid": int(row[1]), "name": os.path.basename(row[2]), "used_memory_mib": _int_or_none(row[3]),
            })


def probe_nvidia_smi(run, smi_path):
    """run(argv) -> (rc, stdout, stderr). Returns (details, driver_version, no_devices)."""
    rc, out, err = run([smi_path, "--query-gpu=" + ",".join(SMI_GPU_FIELDS), "--format=csv,noheader,nounits"])
    if NO_DEVICES in (out or "") or NO_DEVICES in (err or ""):
        return {}, None, True
    if rc != 0:
        raise GpuInfoError("%s failed (rc=%s): %s" % (smi_path, rc, (err or out or "").strip()[:500]))
    details, driver_version = parse_smi_gpus(out)
    rc, out, err = run([smi_path, "--query-compute-apps=" + ",".join(SMI_APP_FIELDS),
                        "--format=csv,noheader,nounits"])
    if rc == 0:
        parse_smi_apps(out, details)
    return details, driver_version, False


# --------------------------------------------------------------------------- the whole picture
EMPTY_DETAILS = {
    "name": None, "uuid": None, "compute_capability": None, "memory_total_mib": None,
    "memory_used_mib": None, "memory_free_mib": None, "persistence_mode": None, "processes": [],
}


def module_flavor(sysfs_root, procfs_root, modules_root, kernel_release, modinfo_license):
    """(driver version, module flavor, where the flavor was read): sysfs/proc, then modinfo, then the module files."""
    version, flavor, flavor_source = driver_version_and_flavor(sysfs_root, procfs_root)
    if flavor is None:
        license_text = modinfo_license() if modinfo_license else None
        if license_text:
            flavor, flavor_source = flavor_from_license(license_text), "modinfo"
        else:
            for path in find_module_files(modules_root, kernel_release or os.uname().release):
                flavor = flavor_from_license(module_file_license(path))
                if flavor:
                    flavor_source = "module_file"
                    break
    return version, flavor, flavor_source


def iommu_group_names(sysfs_root):
    try:
        return os.listdir(os.path.join(sysfs_root, "kernel", "iommu_groups"))
    except OSError:
        return []


def probe_details(probe, procfs_root, run, smi_path, pynvml):
    """Ask NVML, then nvidia-smi (as PROBE allows): (source, details by PCI address, driver version, probe errors).

    The source is "sysfs" (details empty) when neither answered; a probe named alone raises instead.
    """
    source, details, version, probe_errors = "sysfs", {}, None, []
    if probe in ("auto", "nvml"):
        try:
            details, version = probe_nvml(procfs_root, pynvml=pynvml)
            source = "nvml"
        except GpuInfoError as exc:
            if probe == "nvml":
                raise
            probe_errors.append(str(exc))
    if source == "sysfs" and probe in ("auto", "nvidia-smi"):
        if smi_path and run:
            try:
                details, version, _no_devices = probe_nvidia_smi(run, smi_path)
                source = "nvidia-smi"
            except GpuInfoError as exc:
                if probe == "nvidia-smi":
                    raise
                probe_errors.append(str(exc))
        elif probe == "nvidia-smi":
            raise GpuInfoError("probe=nvidia-smi but nvidia-smi is not on PATH")
        else:
            probe_errors.append("nvidia-smi is not on PATH")
    return source, details, version, probe_errors


def add_device_details(devices, details, procfs_root, dev_root):
    """Give every device the EMPTY_DETAILS keys: the probe's answer, else what the nvidia driver publishes."""
    for device in devices:
        extra = dict(EMPTY_DETAILS, processes=[])
        if device["address"] in details:
            extra.update(details[device["address"]])
        elif device["kind"] == "gpu" and device["driver"] == "nvidia":
            # No NVML/nvidia-smi answer: what the nvidia driver itself publishes under /proc.
            info = nvidia_proc_information(procfs_root, device["address"])
            extra["name"] = info.get("Model")
            extra["uuid"] = info.get("GPU UUID")
            minor = gpu_minor(procfs_root, device["address"])
            if minor is not None:
                extra["processes"] = processes_holding(procfs_root, [os.path.join(dev_root, "nvidia%d" % minor)])
        device.update(extra)


def diagnose(devices, modules, flavor, source, gpu_count, iommu_groups, kernel_log, sysfs_root):
    """The gpu_info diagnosis list: each entry a code and an actionable message."""
    gpus = [d for d in devices if d["kind"] == "gpu"]
    nvidia_bound = [d for d in gpus if d["driver"] == "nvidia"]
    on_vfio = [d for d in gpus if d["driver"] == "vfio-pci"]
    host_side = [d for d in gpus if d["driver"] != "vfio-pci"]
    diagnosis = []
    if parse_kernel_log(kernel_log):
        diagnosis.append({"code": "open_module_required", "message": (
            "The kernel log says these GPUs require the NVIDIA open kernel module%s. %s" % (
                " (the loaded module is the proprietary one)" if flavor == "proprietary" else "", FIX_OPEN))})
    elif flavor == "proprietary" and host_side and not nvidia_bound and modules.get("nvidia"):
        diagnosis.append({"code": "open_module_required", "message": (
            "The proprietary nvidia module is loaded but serves none of the %d NVIDIA GPU(s); if they are "
            "Blackwell or newer it refuses them. %s" % (len(host_side), FIX_OPEN))})
    if not devices:
        diagnosis.append({"code": "no_devices_found", "message": (
            "No NVIDIA PCI function under %s/bus/pci/devices. On a VM guest, check that the GPUs are passed "
            "through (hostpci in the VM config); on bare metal, check the card is seated and visible to the "
            "firmware." % sysfs_root)})
    elif host_side and not modules.get("nvidia"):
        diagnosis.append({"code": "driver_not_loaded", "message": (
            "%d NVIDIA GPU(s) are on the PCI bus but the nvidia kernel module is not loaded. Install the driver "
            "(role gpufleet.llm_server.nvidia_driver) or run `modprobe nvidia`; the kernel log says why a load "
            "failed." % len(host_side))})
    elif source != "sysfs" and gpu_count == 0 and host_side:
        diagnosis.append({"code": "no_devices_found", "message": (
            "%s sees no GPU although %d NVIDIA GPU(s) are on the PCI bus outside vfio-pci (%s). Typical cause: "
            "the proprietary kernel module on a GPU that needs the open one; check the kernel log for NVRM "
            "messages." % (source, len(host_side), ", ".join(d["address"] for d in host_side)))})
    driverless = [d["address"] for d in gpus if d["driver"] is None and modules.get("nvidia")]
    if driverless:
        diagnosis.append({"code": "gpu_without_driver", "message": (
            "GPU(s) %s are bound to no driver although nvidia is loaded; see the kernel log "
            "(NVRM lines) for the reason." % ", ".join(driverless))})
    if on_vfio and not iommu_groups:
        diagnosis.append({"code": "iommu_disabled", "message": (
            "GPU(s) are on vfio-pci but the IOMMU is off: enable it on the kernel command line "
            "(intel_iommu=on or amd_iommu=on, iommu=pt) and reboot.")})
    return diagnosis


def collect(sysfs_root="/sys", procfs_root="/proc", dev_root="/dev", probe="auto", run=None,
            smi_path=None, kernel_log=None, kernel_log_source=None, modules_root="/lib/modules",
            kernel_release=None, modinfo_license=None, pynvml=None):
    """Build the gpu_info dict (see plugins/modules/gpu_info.py RETURN).

    run: callable(argv) -> (rc, out, err) for nvidia-smi; smi_path: nvidia-smi path or None;
    kernel_log: kernel log text or None; modinfo_license: callable() -> license text of the
    installed nvidia module (e.g. `modinfo -F license nvidia`) or None.
    """
    if probe not in PROBES:
        raise GpuInfoError("probe=%r is not one of %s" % (probe, ", ".join(PROBES)))
    devices = scan_pci(sysfs_root)
    modules = loaded_modules(sysfs_root, procfs_root)
    version, flavor, flavor_source = module_flavor(sysfs_root, procfs_root, modules_root, kernel_release,
                                                   modinfo_license)
    iommu_groups = iommu_group_names(sysfs_root)
    source, details, probed_version, probe_errors = probe_details(probe, procfs_root, run, smi_path, pynvml)
    version = version or probed_version
    add_device_details(devices, details, procfs_root, dev_root)

    gpus = [d for d in devices if d["kind"] == "gpu"]
    nvidia_bound = [d for d in gpus if d["driver"] == "nvidia"]
    gpu_count = len(details) if source != "sysfs" else len(nvidia_bound)
    return {
        "source": source,
        "driver_version": version,
        "module_flavor": flavor,
        "module_flavor_source": flavor_source,
        "modules_loaded": modules,
        "iommu_enabled": bool(iommu_groups),
        "gpu_count": gpu_count,
        "pci_gpu_count": len(gpus),
        "nvidia_bound_count": len(nvidia_bound),
        "vfio_bound_count": sum(1 for d in gpus if d["driver"] == "vfio-pci"),
        "devices": devices,
        "diagnosis": diagnose(devices, modules, flavor, source, gpu_count, iommu_groups, kernel_log, sysfs_root),
        "probe_errors": probe_errors,
        "kernel_log_source": kernel_log_source,
    }
