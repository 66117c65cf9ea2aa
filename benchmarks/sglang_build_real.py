"""The sglang_build role on a bare container with SGLang's REAL dependencies from PyPI: time, disk, installed set.

    python3 benchmarks/sglang_build_real.py [--version 0.5.10.post1] [--keep] [--json FILE]

Not part of `make test`: it downloads and installs about 12 GB (torch and its CUDA libraries, flashinfer,
sgl-kernel, transformers, ...) and takes about 12 minutes on a 2-core machine (issue 32's filer: 181 wheels,
12 GB venv, 704 s). The container needs PyPI (and Debian's archive when its image lacks libnuma1). Steps:
1. the real release sdist from PyPI (tests/support/pypi.py, cached) laid out as `python/` in a local git
   repository tagged v<version> (molecule/shared/make_standin_repo.sh's layout, without its stand-ins);
2. one bare container `gpufleet-sglang-real` from the Molecule base image; the repository copied in;
3. the role (roles: sglang_build, docker connection) with pip's default index, sglang_build_verify_modules
   [sglang.launch_server] (a container has no GPU: the HTTP server's import needs the driver's libcuda.so.1,
   see docs/sglang-builds.md), timed;
4. the same run again (must report changed=0 and install nothing), timed;
5. prints both times, the venv's size (`du -sb`), the number of installed distributions and `pip check`;
   --json writes them with the installed set (`pip list --format json`). The container is removed unless --keep.
Requires the Docker engine and the image (scripts/ensure-docker.sh, scripts/build-base-image.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from converged_hosts import ROOT, playbook, recap_changed, remove, sh, start

sys.path.insert(0, str(ROOT / "tests"))
from support.pypi import download  # noqa: E402  pylint: disable=wrong-import-position

NAME = "gpufleet-sglang-real"
VENV = "/opt/sglang/venv"


def release_repo(version: str, work: pathlib.Path) -> pathlib.Path:
    sdist = download("sglang", version, prefer="sdist")
    if not sdist.name.endswith(".tar.gz"):
        sys.exit("sglang %s has no sdist on PyPI (%s): releases after 0.5.10.post1 ship wheels only" % (version, sdist))
    repo = work / "repo"
    (work / "x").mkdir()
    subprocess.run(["tar", "-C", str(work / "x"), "-xzf", str(sdist)], check=True)
    repo.mkdir()
    (work / "x" / f"sglang-{version}").rename(repo / "python")
    for junk in ("PKG-INFO", "setup.cfg", "sglang.egg-info", "sglang/_version.py"):
        subprocess.run(["rm", "-rf", str(repo / "python" / junk)], check=True)
    (repo / ".gitignore").write_text("python/sglang/_version.py\n*.egg-info/\n__pycache__/\n")
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "PATH": "/usr/bin:/bin"}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", f"SGLang {version} (PyPI sdist)"],
                 ["tag", "-a", f"v{version}", "-m", f"v{version}"]):
        subprocess.run(["git", *argv], cwd=repo, check=True, env=env)
    return repo


def in_container(*argv: str) -> str:
    return sh(["docker", "exec", NAME, *argv]).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.5.10.post1")
    ap.add_argument("--keep", action="store_true", help="keep the container afterwards")
    ap.add_argument("--json", type=pathlib.Path, help="also write the figures and the installed set here")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-sglang-real-"))
    repo = release_repo(args.version, work)
    start(NAME)
    try:
        sh(["docker", "cp", str(repo), f"{NAME}:/srv/sglang-upstream"])
        # A machine that reaches PyPI through a TLS-intercepting proxy trusts its CA through PIP_CERT: the
        # container's pip (and the pip of each isolated build) reads the same bundle from /etc/pip.conf.
        if os.environ.get("PIP_CERT") and os.path.isfile(os.environ["PIP_CERT"]):
            sh(["docker", "cp", os.environ["PIP_CERT"], f"{NAME}:/etc/gpufleet-bench-ca.pem"])
            sh(["docker", "exec", NAME, "sh", "-c", "printf '[global]\\ncert = /etc/gpufleet-bench-ca.pem\\n' > /etc/pip.conf"])
        inventory = work / "hosts.yml"
        inventory.write_text(json.dumps({"all": {"hosts": {NAME: {"ansible_connection": "community.docker.docker"}}}}))
        play = work / "build.yml"
        play.write_text(json.dumps([{
            "name": "sglang_build with the real dependencies", "hosts": "all", "gather_facts": False,
            "vars": {"sglang_build_git_url": "/srv/sglang-upstream", "sglang_build_ref": f"v{args.version}",
                     "sglang_build_verify_modules": ["sglang.launch_server"], "sglang_build_restart_marker": ""},
            "roles": [{"role": "gpufleet.llm_server.sglang_build"}]}]))
        figures = {"version": args.version}
        for label in ("first", "second"):
            elapsed, out, rc = playbook(inventory, play, 1, log=work / f"{label}.log")
            figures[f"{label}_seconds"] = round(elapsed, 1)
            figures[f"{label}_changed"] = recap_changed(out).get(NAME)
            print(f"{label} run: {elapsed:.0f} s, rc {rc}, changed={figures[f'{label}_changed']}", flush=True)
            if rc != 0:
                print(out[-6000:])
                return 1
        figures["venv_bytes"] = int(in_container("du", "-sb", VENV).split()[0])
        listing = json.loads(in_container(f"{VENV}/bin/python", "-m", "pip", "list", "--format", "json"))
        figures["distributions"] = len(listing)
        check = sh(["docker", "exec", NAME, f"{VENV}/bin/python", "-m", "pip", "check"])
        figures["pip_check"] = (check.stdout + check.stderr).strip()
        print(f"venv {figures['venv_bytes'] / 1e9:.1f} GB, {len(listing)} distributions; pip check: {figures['pip_check']}")
        if args.json:
            args.json.write_text(json.dumps(dict(figures, installed=listing), indent=1) + "\n")
        return 0 if figures["second_changed"] == 0 else 1
    finally:
        if not args.keep:
            remove(NAME)


if __name__ == "__main__":
    sys.exit(main())
