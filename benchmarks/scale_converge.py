"""No-op converge time of site.yml on 1, 4 and 8 container hosts, and the ratio T(8)/T(1).

    python3 benchmarks/scale_converge.py [--sizes 1 4 8] [--forks 20] [--keep]

Not part of `make test` (it converges site.yml on 8 systemd containers first, minutes on a small
machine). Steps:
1. start max(sizes) containers `gpufleet-scale-<i>` from the Molecule base image (same systemd
   settings as .config/molecule/config.yml, on Docker's default bridge network so that every
   container's loopback is its own: all run the default scenario's profile on the same port);
2. write an inventory (group llm_servers, docker connection) with molecule/default/group_vars;
3. converge site.yml on all of them once (untimed, as molecule/default/prepare.yml + converge);
4. time a second, no-op converge (`--limit` the first N hosts) for each N, and check changed=0;
5. print the times and T(max)/T(1); remove the containers unless --keep.
Requires the Docker engine and the image (scripts/ensure-docker.sh, scripts/build-base-image.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
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


def playbook(inventory: pathlib.Path, play: pathlib.Path, forks: int, limit: str | None = None,
             log: pathlib.Path | None = None) -> tuple[float, str, int]:
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_FORCE_COLOR="0",
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
    ap.add_argument("--json", type=pathlib.Path, help="also write the figures here")
    args = ap.parse_args()
    n_max = max(args.sizes)
    names = [f"gpufleet-scale-{i}" for i in range(1, n_max + 1)]
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-scale-"))
    shutil.copytree(ROOT / "molecule" / "default" / "group_vars", work / "group_vars")
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"llm_servers": {"hosts": {
        n: {"ansible_connection": "community.docker.docker"} for n in names}}}}}, indent=1))
    prepare = ROOT / "molecule" / "default" / "prepare.yml"
    site = ROOT / "site.yml"
    figures: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        for name in names:
            start(name)
        print(f"started {n_max} containers in {time.monotonic() - t0:.0f}s", flush=True)
        for play, label in ((prepare, "prepare"), (site, "first converge")):
            elapsed, out, rc = playbook(inventory, play, args.forks, log=work / f"{label.replace(' ', '-')}.log")
            print(f"{label} on {n_max} hosts: {elapsed:.0f}s (rc={rc})", flush=True)
            if rc != 0:
                print(out[-4000:])
                return 1
        for n in sorted(args.sizes):
            limit = ",".join(names[:n])
            elapsed, out, rc = playbook(inventory, site, args.forks, limit, log=work / f"noop-{n}.log")
            changed = recap_changed(out)
            print(f"no-op converge on {n} host(s): {elapsed:.1f}s rc={rc} changed={changed}", flush=True)
            if rc != 0 or any(changed.values()):
                print(f"not a no-op run (see {work}/noop-{n}.log)")
                return 1
            figures[f"T({n})"] = round(elapsed, 1)
        lo, hi = min(args.sizes), max(args.sizes)
        ratio = figures[f"T({hi})"] / figures[f"T({lo})"]
        figures[f"T({hi})/T({lo})"] = round(ratio, 2)
        print(json.dumps({"forks": args.forks, **figures}))
        if args.json:
            args.json.write_text(json.dumps({"forks": args.forks, **figures}, indent=1) + "\n")
        return 0
    finally:
        if not args.keep:
            for name in names:
                sh(["docker", "rm", "-f", name])
        print(f"logs: {work}")


if __name__ == "__main__":
    sys.exit(main())
