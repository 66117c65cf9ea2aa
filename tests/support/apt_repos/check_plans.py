"""Compare the nvidia_driver role's check-mode plans with the mirrored indexes (indexes.yml).

Input: the JSON written by molecule/nvidia_driver/check_pairs.yml - one entry per (source, branch[, flavour,
profile, kernel modules]) with what the role asked apt for ("first", "wanted"), apt's plan ("plan": installed,
packages, driver_version, missing) and the refusal message, if any. For each entry:
  - what the role asks for equals what the documentation says to install (indexes.yml "documented");
  - every NVIDIA driver package apt would install exists in the mirrored index with exactly that version;
  - the driver version is the newest of the branch in the mirror - or, for a branch the archive ships as
    transitional packages, the newest of the branch it moves to AND the role refused;
  - nothing is missing.
Prints a Markdown table; exit status 1 on any mismatch.

usage: python3 check_plans.py PLANS.json [--data indexes.yml] [--distribution ubuntu2404]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_repo import load_data, stanzas, upstream  # noqa: E402  (sibling module, also run as a script)

DRIVER_NAME = re.compile(r"^(lib)?nvidia-|^xserver-xorg-video-nvidia-|^cuda-drivers|^libcuda1$|^firmware-nvidia-gsp$")


def version_key(version):
    return tuple(int(part) for part in re.findall(r"\d+", upstream(version))[:3])


def repo_for(source, distribution):
    return {"ubuntu": "ubuntu-%s" % {"ubuntu2404": "noble", "ubuntu2204": "jammy"}.get(distribution, distribution),
            "nvidia": "nvidia-%s" % distribution}[source]


def newest_driver(index, branch):
    versions = [p["version"] for p in index if p.get("branch") == branch and DRIVER_NAME.search(p["name"])
                and upstream(p["version"]).startswith(branch + ".")]
    return upstream(max(versions, key=version_key)) if versions else ""


def check(entry, data, distribution):
    problems = []
    repo = repo_for(entry["source"], distribution)
    index = stanzas(data, repo)
    by_key = {(p["name"], p["version"]) for p in index}
    documented = data["documented"][repo][entry["branch"]]
    flavor = entry.get("flavor", "open")
    profile = "precompiled" if entry.get("kernel_modules") == "precompiled" else entry.get("profile", "compute")
    doc = documented[flavor][profile]
    if entry["first"] != doc.get("first", []) or entry["wanted"] != doc["then"]:
        problems.append("asks for %s then %s; the documentation says %s then %s" % (
            entry["first"], entry["wanted"], doc.get("first", []), doc["then"]))
    plan = entry.get("plan") or {}
    if plan.get("missing"):
        problems.append("apt misses %s" % plan["missing"])
    for op in plan.get("installed", []):
        if DRIVER_NAME.search(op["name"]) and (op["name"], op["version"]) not in by_key:
            problems.append("%s %s is not in the mirrored %s index" % (op["name"], op["version"], repo))
    transitional = documented.get("transitional_to")
    want_branch = transitional or entry["branch"]
    want = newest_driver(index, want_branch)
    if plan.get("driver_version") != want:
        problems.append("driver %s, the mirror's newest of %s is %s" % (plan.get("driver_version"), want_branch, want))
    if transitional and "transitional" not in entry.get("refused", ""):
        problems.append("branch %s is transitional to %s but the role did not refuse it" % (entry["branch"], transitional))
    if not transitional and entry.get("refused"):
        problems.append("refused: %s" % entry["refused"])
    return repo, want, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", type=pathlib.Path)
    parser.add_argument("--data", default=str(HERE / "indexes.yml"))
    parser.add_argument("--distribution", default="ubuntu2404")
    args = parser.parse_args()
    data = load_data(args.data)
    entries = json.loads(args.plans.read_text())
    failed = False
    print("| source | branch | variant | asks apt for | driver planned | mirror | result |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for entry in entries:
        repo, want, problems = check(entry, data, args.distribution)
        failed |= bool(problems)
        variant = "/".join([entry.get("flavor", "open"), entry.get("profile", "compute"), entry.get("kernel_modules", "dkms")])
        asked = " ".join(entry["first"] + (["then"] if entry["first"] else []) + entry["wanted"])
        result = "; ".join(problems) if problems else ("ok (refused: transitional)" if entry.get("refused") else "ok")
        planned = (entry.get("plan") or {}).get("driver_version")
        print("| %s | %s | %s | %s | %s | %s %s | %s |" % (entry["source"], entry["branch"], variant, asked, planned, repo, want, result))
    if not entries:
        print("no plans in %s" % args.plans)
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
