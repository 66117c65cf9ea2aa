# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which PCI functions a Proxmox VM's config passes through, which device nodes a container's
config gives it, and whether they match the GPUs a switch moves. Standard library only.

Formats, as Proxmox VE defines them (read in its source, not guessed):
- `qm config VMID` / `pct config CTID` print one `key: value` line per option, then the raw `lxc.*`
  keys of a container (pve-container src/PVE/CLI/pct.pm, `config`).
- `hostpciN: [host=]HOSTPCIID[;HOSTPCIID2...][,mapping=ID][,pcie=1]...` with HOSTPCIID
  `[domain:]bus:dev[.func]`; without `.func` all functions of the device pass through; exactly one of
  host / mapping (qemu-server src/PVE/QemuServer/PCI.pm, `$hostpci_fmt`, `parse_hostpci`).
- `mapping=ID` resolves through /etc/pve/mapping/pci.cfg (pve-guest-common src/PVE/Mapping/PCI.pm): a
  section `ID` with `map` lines `id=VVVV:DDDD,node=NODE,path=PATH[;PATH...][,iommugroup=N]...`; each
  `map` of the current node is one alternative device, and each hostpci entry using the mapping takes
  one free alternative when the VM starts (`choose_hostpci_devices`).
- `devN: [path=]/dev/...[,gid=..][,mode=..][,uid=..][,deny-write=..]` (pve-container
  src/PVE/LXC/Config.pm, `$dev_desc`), or raw `lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,...`.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.gpu_info import gpu_minor, pci_device

HOSTPCI_ID_RE = re.compile(r"^(?:(?P<domain>[0-9a-f]{4,}):)?(?P<bus>[0-9a-f]{2}):(?P<dev>[0-9a-f]{2})"
                           r"(?:\.(?P<func>[0-9a-f]))?$")
NVIDIA_NODES = ("nvidiactl", "nvidia-uvm")


class GuestConfigError(Exception):
    """The config cannot be read as Proxmox writes it."""


def parse_config(text):
    """{key: [values]} from `qm config` / `pct config` output (raw lxc keys may repeat)."""
    config = {}
    for line in (text or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        config.setdefault(key.strip(), []).append(value.strip())
    return config


def property_string(value, default_key):
    """'0000:01:00,pcie=1' -> {'host': '0000:01:00', 'pcie': '1'} (Proxmox property strings)."""
    out = {}
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if sep:
            out[key.strip()] = val.strip()
        else:
            out[default_key] = key
    return out


def expand_pci_id(sysfs_root, pci_id):
    """Functions an ID names: '01:00.0' -> ['0000:01:00.0']; '01:00' -> every function of 0000:01:00."""
    match = HOSTPCI_ID_RE.match(pci_id.strip().lower())
    if not match:
        raise GuestConfigError("%r is not a PCI id of the form [domain:]bus:dev[.func]" % pci_id)
    domain = (match.group("domain") or "0000")[-4:].rjust(4, "0")
    prefix = "%s:%s:%s" % (domain, match.group("bus"), match.group("dev"))
    if match.group("func") is not None:
        return ["%s.%s" % (prefix, match.group("func"))]
    try:
        names = os.listdir(os.path.join(sysfs_root, "bus", "pci", "devices"))
    except OSError:
        names = []
    found = sorted(name for name in names if name.startswith(prefix + "."))
    return found or ["%s.0" % prefix]


def parse_pci_mapping(text):
    """{mapping id: [map property dicts]} from /etc/pve/mapping/pci.cfg (a PVE section config)."""
    mappings = {}
    current = None
    for raw in (text or "").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            current = raw.strip()
            mappings.setdefault(current, [])
            continue
        if current is None:
            continue
        key, _sep, value = raw.strip().partition(" ")
        if key == "map":
            mappings[current].append(property_string(value.strip(), "path"))
    return mappings


def vm_functions(config, sysfs_root, mappings, node):
    """(entries, functions) of a VM config: every hostpci entry with the functions it can take."""
    entries = []
    uses = {}
    for key in sorted(k for k in config if re.match(r"^hostpci\d+$", k)):
        props = property_string(config[key][-1], "host")
        if "mapping" in props and "host" in props:
            raise GuestConfigError("%s sets both host and mapping (%s)" % (key, config[key][-1]))
        if "mapping" in props:
            name = props["mapping"]
            maps = [m for m in mappings.get(name, []) if m.get("node") == node]
            if not maps:
                raise GuestConfigError("%s uses mapping=%s, which has no device on node %r in the PCI mapping "
                                       "file" % (key, name, node))
            alternatives = [[f for pid in m.get("path", "").split(";") if pid for f in expand_pci_id(sysfs_root, pid)]
                            for m in maps]
            uses.setdefault(name, []).append(key)
            entries.append({"key": key, "value": config[key][-1], "mapping": name, "alternatives": alternatives,
                            "functions": sorted({f for alt in alternatives for f in alt})})
        elif "host" in props:
            functions = sorted({f for pid in props["host"].split(";") if pid for f in expand_pci_id(sysfs_root, pid)})
            entries.append({"key": key, "value": config[key][-1], "functions": functions})
        else:
            raise GuestConfigError("%s sets neither host nor mapping (%s)" % (key, config[key][-1]))
    for name, keys in uses.items():
        alternatives = next(e["alternatives"] for e in entries if e.get("mapping") == name)
        if len(keys) < len(alternatives):
            raise GuestConfigError(
                "mapping=%s lists %d devices on node %r but only %d hostpci entries (%s) use it: Proxmox picks "
                "which %d the VM gets when it starts, so the GPUs this switch moves cannot all be the VM's. Give "
                "the VM one hostpci entry per device of the mapping, or list the GPUs in gpu_passthrough_devices"
                % (name, len(alternatives), node, len(keys), ", ".join(keys), len(keys)))
    functions = sorted({f for entry in entries for f in entry["functions"]})
    return entries, functions


def ct_device_nodes(config):
    """Device nodes a container config passes in: devN entries and raw lxc.mount.entry sources."""
    nodes = {}
    for key in sorted(config):
        for value in config[key]:
            if re.match(r"^dev\d+$", key):
                path = property_string(value, "path").get("path", "")
            elif key == "lxc.mount.entry":
                path = value.split()[0] if value.split() else ""
            else:
                continue
            if path.startswith("/dev/"):
                nodes[os.path.normpath(path)] = key
    return nodes


def _moved(addresses, sysfs_root):
    out = []
    for address in addresses:
        info = pci_device(sysfs_root, address)
        out.append(info or {"address": address, "kind": "other", "driver": None, "vendor_id": None})
    return out


def compare_vm(addresses, vm_funcs, sysfs_root):
    """Problems between the functions moved and the VM's: every moved GPU must be the VM's, and every
    NVIDIA function the VM names must be moved (Proxmox would take it from the host itself at start)."""
    problems = []
    moved_set = set(addresses)
    for entry in _moved(addresses, sysfs_root):
        if entry["kind"] == "gpu" and entry["address"] not in vm_funcs:
            problems.append("%s (GPU) is moved but no hostpci entry names it" % entry["address"])
    for address in vm_funcs:
        if address in moved_set:
            continue
        info = pci_device(sysfs_root, address)
        if info is None:
            problems.append("%s is named by a hostpci entry but is not on the PCI bus" % address)
        elif info["vendor_id"] == "0x10de":
            problems.append("%s (%s, on %s) is named by a hostpci entry but is not moved: the VM would take it "
                            "from the host when it starts" % (address, info["kind"], info["driver"]))
    return problems


def compare_ct(addresses, nodes, sysfs_root, procfs_root):
    """Problems between the GPUs moved and the container's device nodes: /dev/nvidiactl, /dev/nvidia-uvm and
    /dev/nvidiaN of every moved GPU (N from /proc/driver/nvidia/gpus/ADDR/information). A GPU not on
    nvidia has no number yet: the container must then name as many other /dev/nvidiaN nodes as there are
    such GPUs (the role checks exactly once the GPUs are on nvidia). Returns (problems, unnumbered GPUs)."""
    problems = []
    for name in NVIDIA_NODES:
        if "/dev/" + name not in nodes:
            problems.append("/dev/%s is not passed to the container" % name)
    numbered = {path for path in nodes if re.match(r"^/dev/nvidia\d+$", path)}
    known = set()
    unknown = []
    for entry in _moved(addresses, sysfs_root):
        if entry["kind"] != "gpu":
            continue
        minor = gpu_minor(procfs_root, entry["address"]) if entry["driver"] == "nvidia" else None
        if minor is None:
            unknown.append(entry["address"])
            continue
        path = "/dev/nvidia%d" % minor
        known.add(path)
        if path not in nodes:
            problems.append("%s is GPU %s but is not passed to the container" % (path, entry["address"]))
    spare = sorted(numbered - known)
    if unknown and len(spare) < len(unknown):
        problems.append("%d GPUs (%s) have no nvidia device number yet, but the container names only %d other "
                        "/dev/nvidiaN nodes (%s)"
                        % (len(unknown), ", ".join(unknown), len(spare), ", ".join(spare) or "none"))
    return problems, unknown


__all__ = ["GuestConfigError", "parse_config", "property_string", "expand_pci_id", "parse_pci_mapping",
           "vm_functions", "ct_device_nodes", "compare_vm", "compare_ct"]
