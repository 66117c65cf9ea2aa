"""No-op converge time of site.yml on 1, 4 and 8 container hosts, and the ratio T(8)/T(1).

    python3 benchmarks/scale_converge.py [--sizes 1 4 8] [--forks 20] [--keep] [--reuse]
                                         [--no-pipelining] [--json FILE]

Not part of `make test` (it converges site.yml on 8 systemd containers first, minutes on a small
machine). Steps:
1. start max(sizes) containers `gpufleet-scale-<i>` from the Molecule base image (same systemd
   settings as .config/molecule/config.yml, on Docker's default bridge network so that every
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
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
IMAGE = os.environ.get("GPUFLEET_MOLECULE_IMAGE", "gpufleet/debian12-systemd:latest")


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)


def start(name: str) -> None:
    sh(["docker", "rm", "-f", name])
    proc = sh(["docker", "run", "-d", "--name", name, "--hostname", name,
               "--cap-add", "SYS_ADMIN", "--cgroupns=host",
               "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
               "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
               "--tmpfs", "/tmp", "--stop-signal", "SIGRTMIN+3", IMAGE, "/lib/systemd/systemd"])
    if proc.returncode != 0:
        sys.exit(f"docker run {name} failed: {proc.stderr}")


def container_cpu_seconds(name: str) -> float | None:
    """CPU seconds used so far by everything in the container's cgroup (v1 cpuacct or v2 cpu.stat)."""
    cid = sh(["docker", "inspect", "--format", "{{.Id}}", name]).stdout.strip()
    candidates = [
        (pathlib.Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage"), 1e9),
        (pathlib.Path(f"/sys/fs/cgroup/cpu,cpuacct/docker/{cid}/cpuacct.usage"), 1e9),
        (pathlib.Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat"), 1e6),
        (pathlib.Path(f"/sys/fs/cgroup/docker/{cid}/cpu.stat"), 1e6),
    ]
    for path, per_second in candidates:
        if path.is_file():
            text = path.read_text()
            match = re.search(r"usage_usec (\d+)", text) if path.name == "cpu.stat" else re.match(r"(\d+)", text)
            if match:
                return int(match.group(1)) / per_second
    return None


def playbook(inventory: pathlib.Path, play: pathlib.Path, forks: int, limit: str | None = None,
             log: pathlib.Path | None = None, pipelining: bool = True) -> tuple[float, str, int]:
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_PIPELINING=str(pipelining),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               PATH=f"{VENV_BIN}:{os.environ['PATH']}",
               # The default scenario's prepare and group_vars read Molecule's variables.
               MOLECULE_PROJECT_DIRECTORY=str(ROOT), MOLECULE_EPHEMERAL_DIRECTORY=str(inventory.parent),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play)]
    if limit:
        cmd += ["--limit", limit]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False)
    elapsed = time.monotonic() - t0
    if log:
        log.write_text(proc.stdout + proc.stderr)
    return elapsed, proc.stdout, proc.returncode


def recap_changed(stdout: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)", stdout, re.M)}


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
    names = [f"gpufleet-scale-{i}" for i in range(1, n_max + 1)]
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-scale-"))
    if args.reuse:
        # The fingerprint files of the stand-in NVIDIA repositories live in the kept run's directory.
        kept = sorted(pathlib.Path(tempfile.gettempdir()).glob("gpufleet-scale-*/fake-nvidia-repo-*.fingerprint"),
                      key=lambda f: f.stat().st_mtime)
        for fingerprint in kept[-n_max:]:
            shutil.copy(fingerprint, work / fingerprint.name)
    shutil.copytree(ROOT / "molecule" / "default" / "group_vars", work / "group_vars")
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"llm_servers": {"hosts": {
        n: {"ansible_connection": "community.docker.docker"} for n in names}}}}}, indent=1))
    prepare = ROOT / "molecule" / "default" / "prepare.yml"
    site = ROOT / "site.yml"
    figures: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        if not args.reuse:
            for name in names:
                start(name)
            print(f"started {n_max} containers in {time.monotonic() - t0:.0f}s", flush=True)
        for play, label in () if args.reuse else ((prepare, "prepare"), (site, "first converge")):
            elapsed, out, rc = playbook(inventory, play, args.forks, log=work / f"{label.replace(' ', '-')}.log")
            print(f"{label} on {n_max} hosts: {elapsed:.0f}s (rc={rc})", flush=True)
            if rc != 0:
                print(out[-4000:])
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
                sh(["docker", "rm", "-f", name])
        print(f"logs: {work}")


if __name__ == "__main__":
    sys.exit(main())
