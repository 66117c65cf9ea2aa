"""Check gpu_info results from the GPU test host against what must be true there, print Markdown.

Input: one JSON file per probe (auto, nvml, nvidia-smi, sysfs) written by gpu_info_probe.yml.
Expected on the test host (docs/test-infra.md): the NVIDIA open kernel module is loaded, the GPU is
bound to nvidia, compute capability 9.0 (H200), more than 100 GiB of memory.
Exit 0 when every check passes, 1 otherwise. Standard library only.
"""

import argparse
import json
import os
import platform
import sys

PROBES = ("auto", "nvml", "nvidia-smi", "sysfs")


def load(results, probe):
    path = os.path.join(results, probe + ".json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        return {"failed": True, "msg": "no result file %s: %s" % (path, exc)}
    return data


def checks_for(facts, args):
    """[(name, ok, detail)] for one successful gpu_info result."""
    out = []
    gpus = [d for d in facts["devices"] if d["kind"] == "gpu"]
    if args.expect_address:
        gpus = [d for d in gpus if d["address"] == args.expect_address]
    out.append(("NVIDIA GPU on the PCI bus%s" % (" at %s" % args.expect_address if args.expect_address else ""),
                bool(gpus), "pci_gpu_count=%s; diagnosis=%s" % (
                    facts["pci_gpu_count"], [d["code"] for d in facts["diagnosis"]] or "none")))
    out.append(("open kernel module detected", facts["module_flavor"] == "open",
                "module_flavor=%s (from %s)" % (facts["module_flavor"], facts.get("module_flavor_source"))))
    out.append(("nvidia module loaded", facts["modules_loaded"].get("nvidia") is True,
                "modules_loaded=%s" % facts["modules_loaded"]))
    out.append(("GPU bound to nvidia", bool(gpus) and all(d["driver"] == "nvidia" for d in gpus),
                ", ".join("%s: %s" % (d["address"], d["driver"]) for d in gpus) or "no GPU"))
    if facts["source"] != "sysfs":
        out.append(("compute capability %s" % args.expect_cc,
                    bool(gpus) and all(d["compute_capability"] == args.expect_cc for d in gpus),
                    ", ".join(str(d["compute_capability"]) for d in gpus) or "no GPU"))
        out.append(("memory > %s GiB" % args.min_memory_gib,
                    bool(gpus) and all((d["memory_total_mib"] or 0) > args.min_memory_gib * 1024 for d in gpus),
                    ", ".join("%s MiB" % d["memory_total_mib"] for d in gpus) or "no GPU"))
        out.append(("gpu_count matches the PCI bus", facts["gpu_count"] == facts["pci_gpu_count"] > 0,
                    "gpu_count=%s pci_gpu_count=%s" % (facts["gpu_count"], facts["pci_gpu_count"])))
    out.append(("no diagnosis", not facts["diagnosis"],
                "; ".join("%s: %s" % (d["code"], d["message"]) for d in facts["diagnosis"]) or "none"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True)
    parser.add_argument("--started", default="")
    parser.add_argument("--command", default="tests/hardware/run_gpu_info.sh")
    parser.add_argument("--ansible", default="")
    parser.add_argument("--expect-address")
    parser.add_argument("--expect-cc", default="9.0")
    parser.add_argument("--min-memory-gib", type=float, default=100)
    args = parser.parse_args()

    lines = ["## gpu_info on %s (%s)" % (platform.node(), args.started), "",
             "- command: `%s` (from the repository root)" % args.command,
             "- kernel: `%s`, Python %s" % (platform.release(), platform.python_version()),
             "- ansible: %s" % args.ansible,
             "- expected: open kernel module, GPU on nvidia, compute capability %s, memory > %s GiB"
             % (args.expect_cc, args.min_memory_gib), ""]
    failed = 0
    required = {"auto", "nvml", "nvidia-smi", "sysfs"}
    lines += ["| probe | source | check | result | detail |", "| --- | --- | --- | --- | --- |"]
    results = {}
    for probe in PROBES:
        data = load(args.results, probe)
        results[probe] = data
        if data.get("failed"):
            failed += probe in required
            lines.append("| %s | - | gpu_info ran | **FAIL** | %s |" % (probe, str(data.get("msg")).replace("|", "/")[:400]))
            continue
        facts = data["gpu_info"]
        for name, ok, detail in checks_for(facts, args):
            failed += not ok
            verdict = "PASS" if ok else "**FAIL**"
            lines.append("| %s | %s | %s | %s | %s |" % (
                probe, facts["source"], name, verdict, str(detail).replace("|", "/")[:400]))
    auto = results.get("auto", {})
    if not auto.get("failed"):
        facts = auto["gpu_info"]
        lines += ["", "### Host facts (probe auto, source %s)" % facts["source"], "",
                  "| driver_version | module_flavor | iommu_enabled | gpu_count | pci_gpu_count |",
                  "| --- | --- | --- | --- | --- |",
                  "| %s | %s | %s | %s | %s |" % (
                      facts["driver_version"], facts["module_flavor"], facts["iommu_enabled"],
                      facts["gpu_count"], facts["pci_gpu_count"]),
                  "", "| address | ids | kind | driver | override | iommu group | numa | name | cc | memory total/used MiB | persistence | processes |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for dev in facts["devices"]:
            lines.append("| %s | %s:%s | %s | %s | %s | %s | %s | %s | %s | %s/%s | %s | %d |" % (
                dev["address"], dev["vendor_id"], dev["device_id"], dev["kind"], dev["driver"], dev["driver_override"],
                dev["iommu_group"], dev["numa_node"], dev["name"], dev["compute_capability"], dev["memory_total_mib"],
                dev["memory_used_mib"], dev["persistence_mode"], len(dev["processes"])))
        lines += ["", "<details><summary>Raw gpu_info result (probe auto)</summary>", "", "```json",
                  json.dumps(facts, indent=2, sort_keys=True), "```", "", "</details>"]
    lines += ["", "**%s**" % ("ALL CHECKS PASSED" if not failed else "%d CHECK(S) FAILED" % failed)]
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
