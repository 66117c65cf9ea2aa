"""Container hosts converged with site.yml, for the benchmarks that time runs on them.

Shared by benchmarks/scale_converge.py (no-op converge on 1, 4, 8 hosts) and benchmarks/noop_floor.py
(no-op converge against its floor). A host is a systemd container `gpufleet-scale-<i>` from the
Molecule base image, reached through the docker connection, with the default scenario's group_vars.
Not a module of the collection: imported by path from the scripts beside it.
"""

from __future__ import annotations

import configparser
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
WORK_PREFIX = "gpufleet-scale-"


def host_names(count: int) -> list[str]:
    return [f"gpufleet-scale-{i}" for i in range(1, count + 1)]


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


def remove(name: str) -> None:
    sh(["docker", "rm", "-f", name])


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


def configured_callbacks() -> str:
    """callbacks_enabled of the project's ansible.cfg (what a user's run loads), comma-separated."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "ansible.cfg")
    return config.get("defaults", "callbacks_enabled", fallback="")


def playbook(inventory: pathlib.Path, play: pathlib.Path, forks: int, limit: str | None = None,
             log: pathlib.Path | None = None, pipelining: bool = True, extra_args: list[str] | None = None,
             extra_env: dict[str, str] | None = None) -> tuple[float, str, int]:
    """Run ansible-playbook from the repository root; return (wall seconds, stdout, exit status)."""
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_PIPELINING=str(pipelining),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               PATH=f"{VENV_BIN}:{os.environ['PATH']}",
               # The default scenario's prepare and group_vars read Molecule's variables.
               MOLECULE_PROJECT_DIRECTORY=str(ROOT), MOLECULE_EPHEMERAL_DIRECTORY=str(inventory.parent),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    env.update(extra_env or {})
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play)]
    if limit:
        cmd += ["--limit", limit]
    cmd += extra_args or []
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False)
    elapsed = time.monotonic() - t0
    if log:
        log.write_text(proc.stdout + proc.stderr)
    return elapsed, proc.stdout, proc.returncode


RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def recap_changed(stdout: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)", stdout, re.M)}


def recap(stdout: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counters per host: ok, changed, unreachable, failed, skipped."""
    keys = ("ok", "changed", "unreachable", "failed", "skipped")
    return {m.group(1): dict(zip(keys, map(int, m.groups()[1:]))) for m in RECAP.finditer(stdout)}


def new_work_dir() -> pathlib.Path:
    return pathlib.Path(tempfile.mkdtemp(prefix=WORK_PREFIX))


def copy_kept_run_files(work: pathlib.Path, names: list[str]) -> None:
    """--reuse: copy what the first converge of an earlier --keep run left on the controller.

    That run's work directory was its MOLECULE_EPHEMERAL_DIRECTORY: molecule/default/prepare.yml fetched
    one fingerprint file of the stand-in NVIDIA repository per host there (group_vars/llm_servers/
    nvidia_driver.yml reads it), and sglang_service fetched each host's deployment record into
    deployment-records/<host>/ (a fresh directory without it makes that fetch report "changed").
    For each host, the newest such run is used.
    """
    for name in names:
        kept = sorted(pathlib.Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*/fake-nvidia-repo-{name}.fingerprint"),
                      key=lambda f: f.stat().st_mtime)
        kept = [f for f in kept if f.parent != work]
        if not kept:
            continue
        shutil.copy(kept[-1], work / kept[-1].name)
        records = kept[-1].parent / "deployment-records" / name
        if records.is_dir():
            shutil.copytree(records, work / "deployment-records" / name, dirs_exist_ok=True)


def write_inventory(work: pathlib.Path, names: list[str]) -> pathlib.Path:
    """hosts.yml (group llm_servers, docker connection) beside a copy of the default scenario's group_vars."""
    shutil.copytree(ROOT / "molecule" / "default" / "group_vars", work / "group_vars", dirs_exist_ok=True)
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"llm_servers": {"hosts": {
        n: {"ansible_connection": "community.docker.docker"} for n in names}}}}}, indent=1))
    return inventory


def converge(inventory: pathlib.Path, work: pathlib.Path, count: int, forks: int) -> bool:
    """molecule/default/prepare.yml, then a first site.yml (untimed); prints one line per step."""
    prepare = ROOT / "molecule" / "default" / "prepare.yml"
    site = ROOT / "site.yml"
    for play, label in ((prepare, "prepare"), (site, "first converge")):
        elapsed, out, rc = playbook(inventory, play, forks, log=work / f"{label.replace(' ', '-')}.log")
        print(f"{label} on {count} hosts: {elapsed:.0f}s (rc={rc})", flush=True)
        if rc != 0:
            print(out[-4000:])
            return False
    return True
