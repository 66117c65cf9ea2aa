#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Facts about NVIDIA GPUs, their kernel drivers and the nvidia kernel module
version_added: "0.1.0"
description:
  - Lists every NVIDIA PCI function (display and 3D controllers, their HDMI audio companions, other
    NVIDIA functions) with its bound kernel driver, C(driver_override), IOMMU group and NUMA node.
  - For GPUs the nvidia driver serves, adds name, UUID, compute capability, memory, persistence mode
    and the processes using the GPU, from NVML (the C(pynvml) module of nvidia-ml-py) when
    importable, else C(nvidia-smi), else what the driver publishes under C(/proc/driver/nvidia).
  - Reports the driver version, the kernel module flavour (open or proprietary) from
    C(/proc/driver/nvidia/version), else from the installed module's license (C(modinfo) or the
    module file), which of nvidia, nvidia_uvm, nvidia_drm, nvidia_modeset and vfio_pci are loaded,
    and whether the IOMMU is on.
  - Adds a O(ignore:diagnosis) list when the kernel log says the open module is required, when
    NVML/nvidia-smi sees no GPU although NVIDIA GPUs are on the bus, or when the driver is not loaded.
  - Works with no NVIDIA driver installed and with every GPU on vfio-pci (sysfs alone). Never
    changes anything.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.host_roots
  - gpufleet.llm_server.host_roots.dev
  - gpufleet.llm_server.attributes.read_only
options:
  probe:
    description:
      - Where per-GPU details come from. V(auto) tries NVML, then C(nvidia-smi), then sysfs alone.
      - V(sysfs) never loads NVML nor runs C(nvidia-smi) (PCI, driver and module facts only).
      - V(nvml) and V(nvidia-smi) fail when that source cannot be used.
    type: str
    choices: [auto, nvml, nvidia-smi, sysfs]
    default: auto
  kernel_log_path:
    description:
      - Read the kernel log from this file instead of C(dmesg) / C(journalctl -k -b).
      - Used for the O(ignore:diagnosis) of C(NVRM) messages.
    type: path
  read_kernel_log:
    description: Read the kernel log at all (C(dmesg), else C(journalctl -k -b)) when O(kernel_log_path) is unset.
    type: bool
    default: true
  modules_root:
    description: Where installed kernel modules live (module flavour when nvidia is not loaded).
    type: path
    default: /lib/modules
notes:
  - Returns the facts both as RV(ansible_facts.gpu_info) and as the top-level RV(gpu_info).
  - Without NVML/nvidia-smi, O(ignore:gpu_count) counts the GPUs bound to the nvidia driver.
  - Reads C(driver/nvidia), C(modules) and process fds under O(procfs_root), and the C(nvidiaN) device nodes under O(dev_root) (process discovery without NVML).
seealso:
  - module: gpufleet.llm_server.pci_driver_bind
attributes:
  platform:
    support: full
    platforms: linux
    description: Reads Linux sysfs and procfs.
  facts:
    support: full
    description: Returns the facts under RV(ansible_facts.gpu_info).
"""

EXAMPLES = r"""
- name: Read GPU facts
  gpufleet.llm_server.gpu_info:

- name: Fail with the fix when the GPUs need the open kernel module
  ansible.builtin.assert:
    that: ansible_facts.gpu_info.diagnosis | selectattr('code', 'equalto', 'open_module_required') | list | length == 0
    fail_msg: "{{ ansible_facts.gpu_info.diagnosis | map(attribute='message') | join(' ') }}"

- name: PCI facts only, on a Proxmox host where the GPUs may be on vfio-pci
  gpufleet.llm_server.gpu_info:
    probe: sysfs

- name: Against a test tree
  gpufleet.llm_server.gpu_info:
    sysfs_root: /srv/fake/sys
    procfs_root: /srv/fake/proc
    dev_root: /srv/fake/dev
    kernel_log_path: /srv/fake/kmsg.txt
    probe: sysfs
"""

RETURN = r"""
gpu_info:
  description: The facts (also under RV(ansible_facts.gpu_info)).
  returned: always
  type: dict
  contains:
    source:
      description: Where per-GPU details came from.
      type: str
      sample: nvml
      choices: [nvml, nvidia-smi, sysfs]
    driver_version:
      description: Loaded nvidia driver version, or null.
      type: str
      sample: 580.159.04
    module_flavor:
      description: C(open) or C(proprietary) kernel module (loaded, else installed), or null.
      type: str
      sample: open
    module_flavor_source:
      description: Where the flavour was read (C(proc), C(modinfo), C(module_file)) or null.
      type: str
      sample: proc
    modules_loaded:
      description: Whether each kernel module is loaded.
      type: dict
      sample: {nvidia: true, nvidia_uvm: true, nvidia_drm: true, nvidia_modeset: true, vfio_pci: false}
    iommu_enabled:
      description: Whether the kernel has IOMMU groups.
      type: bool
    gpu_count:
      description: GPUs NVML/nvidia-smi sees (sysfs source, GPUs bound to nvidia).
      type: int
      sample: 8
    pci_gpu_count:
      description: NVIDIA display/3D functions on the PCI bus.
      type: int
      sample: 8
    nvidia_bound_count:
      description: GPUs bound to the nvidia driver.
      type: int
    vfio_bound_count:
      description: GPUs bound to vfio-pci.
      type: int
    devices:
      description: One entry per NVIDIA PCI function, sorted by address.
      type: list
      elements: dict
      contains:
        address: {description: PCI address., type: str, sample: "0000:01:00.0"}
        vendor_id: {description: PCI vendor id., type: str, sample: "0x10de"}
        device_id: {description: PCI device id., type: str, sample: "0x2bb1"}
        class: {description: PCI class., type: str, sample: "0x030200"}
        kind: {description: 'One of C(gpu), C(audio), C(other).', type: str, sample: gpu}
        driver: {description: Bound kernel driver or null., type: str, sample: nvidia}
        driver_override: {description: driver_override or null., type: str, sample: vfio-pci}
        iommu_group: {description: IOMMU group or null., type: int, sample: 12}
        iommu_group_members: {description: PCI addresses in the same group., type: list, elements: str}
        numa_node: {description: NUMA node or null., type: int, sample: 0}
        name: {description: Product name (when the nvidia driver serves it)., type: str, sample: NVIDIA H200}
        uuid: {description: GPU UUID., type: str}
        compute_capability: {description: CUDA compute capability., type: str, sample: "12.0"}
        memory_total_mib: {description: Total memory in MiB., type: int}
        memory_used_mib: {description: Used memory in MiB., type: int}
        memory_free_mib: {description: Free memory in MiB., type: int}
        persistence_mode: {description: Persistence mode on/off., type: bool}
        processes:
          description: Processes using the GPU (pid, name, used_memory_mib).
          type: list
          elements: dict
    diagnosis:
      description: Problems found, each with a stable C(code) and a C(message) with the fix.
      type: list
      elements: dict
      sample: [{code: open_module_required, message: "The kernel log says ..."}]
    probe_errors:
      description: Why NVML / nvidia-smi were not used (source C(auto)).
      type: list
      elements: str
    kernel_log_source:
      description: Where the kernel log was read (a path, C(dmesg), C(journalctl)) or null.
      type: str
    read_with:
      description:
        - The O(probe), O(sysfs_root) and O(procfs_root) these facts were read with, so a later task can tell
          whether facts read earlier in the run answer its own question (the nvidia_driver role reuses the
          preflight role's read this way instead of reading the GPUs again).
      type: dict
      sample: {probe: auto, sysfs_root: /sys, procfs_root: /proc}
ansible_facts:
  description: Facts to add to the host.
  returned: always
  type: dict
  contains:
    gpu_info:
      description: Same as RV(gpu_info).
      type: dict
      returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.gpu_info import GpuInfoError, collect


def read_kernel_log(module):
    path = module.params["kernel_log_path"]
    if path:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                return handle.read(), path
        except OSError as exc:
            module.fail_json(msg="kernel_log_path=%s cannot be read: %s. Point it at a readable file or unset it."
                             % (path, exc))
    if not module.params["read_kernel_log"]:
        return None, None
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "-q", "--no-pager"]):
        binary = module.get_bin_path(argv[0])
        if not binary:
            continue
        rc, out, _err = module.run_command([binary] + argv[1:])
        if rc == 0 and out:
            return out, argv[0]
    return None, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            probe=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi", "sysfs"]),
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            dev_root=dict(type="path", default="/dev"),
            kernel_log_path=dict(type="path"),
            read_kernel_log=dict(type="bool", default=True),
            modules_root=dict(type="path", default="/lib/modules"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.isdir(os.path.join(params["sysfs_root"], "bus")):
        module.fail_json(msg="sysfs_root=%s has no bus/ directory: it is not a sysfs tree. Use /sys or a "
                             "fake tree made by tests/support/fake_sysfs.py." % params["sysfs_root"])
    kernel_log, log_source = read_kernel_log(module)

    def run(argv):
        return module.run_command(argv)

    def modinfo_license():
        binary = module.get_bin_path("modinfo")
        if not binary or params["sysfs_root"] != "/sys":
            return None
        rc, out, _err = module.run_command([binary, "-F", "license", "nvidia"])
        return out.strip() if rc == 0 else None

    try:
        facts = collect(
            sysfs_root=params["sysfs_root"], procfs_root=params["procfs_root"], dev_root=params["dev_root"],
            probe=params["probe"], run=run, smi_path=module.get_bin_path("nvidia-smi"),
            kernel_log=kernel_log, kernel_log_source=log_source, modules_root=params["modules_root"],
            modinfo_license=modinfo_license)
    except GpuInfoError as exc:
        module.fail_json(msg="probe=%s: %s. Use probe: auto (falls back) or probe: sysfs." % (params["probe"], exc))
    facts["read_with"] = {key: params[key] for key in ("probe", "sysfs_root", "procfs_root")}
    module.exit_json(changed=False, gpu_info=facts, ansible_facts={"gpu_info": facts})


if __name__ == "__main__":
    main()
