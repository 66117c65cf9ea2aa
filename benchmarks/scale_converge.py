"""No-op converge time of site.yml on 1, 4 and 8 container hosts, and the ratio T(8)/T(1).

    python3 benchmarks/scale_converge.py [--sizes 1 4 8] [--forks 20] [--keep] [--reuse]
                                         [--no-pipelining] [--json FILE]

Not part of `make test` (it converges site.yml on 8 systemd containers first, minutes on a small
machine). Steps:
1. start max(sizes) containers `gpufleet-scale-<i>` from the Molecule base image (same systemd
   settings as the Molecule scenarios' platforms, on Docker's default bridge network so that every
   container's loopback is its own: all run the default scenario's profile on the same port);
2. write an inventory (group llm_servers, docker connection) with molecule/default/group_vars;
3. converge site.yml on all of them once (untimed, as molecule/default/prepare.yml + converge);
4. time a second, no-op converge (`--limit` the first N hosts) for each N, and check changed=0;
5. print the times and T(max)/T(1); remove the containers unless --keep (--reuse skips steps 1-3
   on containers kept by an earlier --keep run).
Besides wall time it prints the CPU seconds each no-op run cost on the controller (ansible-playbook and
its children: forks, docker CLI) and inside the containers (their cgroups' cpuacct): here the controller
and all "hosts" share one machine's cores, so T(8)/T(1) is bounded below by CPU contention, whereas on
a real fleet only the controller's part is shared. The run uses the project's ansible.cfg (pipelining
on); --no-pipelining shows what pipelining saves.
Requires the Docker engine and the image (scripts/ensure-docker.sh, scripts/build-base-image.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import sys
import time

from converged_hosts import (ROOT, container_cpu_seconds, converge, copy_kept_run_files, host_names,
                             new_work_dir, playbook, recap_changed, remove, start, write_inventory)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the containers afterwards")
    ap.add_argument("--reuse", action="store_true",
                    help="containers of an earlier --keep run are there and converged: time only")
    ap.add_argument("--no-pipelining", dest="pipelining", action="store_false",
                    help="time the no-op runs without pipelining (ansible.cfg turns it on)")
    ap.add_argument("--json", type=pathlib.Path, help="also write the figures here")
    args = ap.parse_args()
    n_max = max(args.sizes)
    names = host_names(n_max)
    work = new_work_dir()
    if args.reuse:
        copy_kept_run_files(work, names)
    inventory = write_inventory(work, names)
    site = ROOT / "site.yml"
    figures: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        if not args.reuse:
            for name in names:
                start(name)
            print(f"started {n_max} containers in {time.monotonic() - t0:.0f}s", flush=True)
            if not converge(inventory, work, n_max, args.forks):
                return 1
        for n in sorted(args.sizes):
            limit = ",".join(names[:n])
            targets_before = [container_cpu_seconds(name) for name in names[:n]]
            controller_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed, out, rc = playbook(inventory, site, args.forks, limit, log=work / f"noop-{n}.log",
                                        pipelining=args.pipelining)
            controller_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            targets_after = [container_cpu_seconds(name) for name in names[:n]]
            controller_cpu = (controller_after.ru_utime - controller_before.ru_utime
                              + controller_after.ru_stime - controller_before.ru_stime)
            targets_cpu = (sum(a - b for a, b in zip(targets_after, targets_before))
                           if None not in targets_before + targets_after else None)
            changed = recap_changed(out)
            targets_text = f"{targets_cpu:.0f}" if targets_cpu is not None else "n/a (cgroup not found)"
            print(f"no-op converge on {n} host(s): {elapsed:.1f}s rc={rc} changed={changed}; CPU seconds: "
                  f"controller {controller_cpu:.0f}, containers {targets_text}, on {os.cpu_count()} cores",
                  flush=True)
            if rc != 0 or any(changed.values()):
                print(f"not a no-op run (see {work}/noop-{n}.log)")
                return 1
            figures[f"T({n})"] = round(elapsed, 1)
            figures[f"controller_cpu_s({n})"] = round(controller_cpu, 1)
            if targets_cpu is not None:
                figures[f"containers_cpu_s({n})"] = round(targets_cpu, 1)
        lo, hi = min(args.sizes), max(args.sizes)
        ratio = figures[f"T({hi})"] / figures[f"T({lo})"]
        figures[f"T({hi})/T({lo})"] = round(ratio, 2)
        summary = {"forks": args.forks, "pipelining": args.pipelining, "cores": os.cpu_count(), **figures}
        print(json.dumps(summary))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1) + "\n")
        return 0
    finally:
        if not args.keep:
            for name in names:
                remove(name)
        print(f"logs: {work}")


if __name__ == "__main__":
    sys.exit(main())
