"""Bundle the PyPI files Molecule's prepare copies into the container; print the bundle's path.

The bundle (an uncompressed tar, cached next to the downloads) holds:
- ``sglang-sdist.tar.gz``: the real SGLang release sdist the local git repository is built from;
- ``wheels/``: SGLang's build backend (setuptools, setuptools-scm and their dependencies, pinned
  here), so `pip install -e python` in the container builds with `--no-index --find-links` and
  needs no network (the CI proxy's CA is not in the container's trust store).

usage: python3 sglang_test_inputs.py [SGLANG_VERSION]   (default 0.5.10.post1; run on the controller)
Downloads go through tests/support/pypi.py (cache: $GPUFLEET_CACHE).
"""

import os
import pathlib
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from support.pypi import CACHE, download  # noqa: E402  pylint: disable=wrong-import-position

# build-system.requires of SGLang 0.5.10.post1: setuptools>=61.0, setuptools-scm>=8.0, wheel
BUILD_WHEELS = [
    ("setuptools", "84.2.1"),
    ("setuptools-scm", "10.3.4"),
    ("vcs-versioning", "2.6.0"),
    ("packaging", "26.4"),
    ("wheel", "0.48.0"),
]

version = sys.argv[1] if len(sys.argv) > 1 else "0.5.10.post1"
sdist = download("sglang", version, prefer="sdist")
if not sdist.name.endswith(".tar.gz"):
    sys.exit("sglang %s has no sdist on PyPI (got %s); releases after 0.5.10.post1 ship wheels only" % (version, sdist.name))
wheels = [download(name, ver, prefer="wheel") for name, ver in BUILD_WHEELS]
bundle = CACHE / "molecule" / ("sglang-test-inputs-%s-%s.tar" % (version, "-".join(v for _n, v in BUILD_WHEELS)))
if not bundle.exists():
    bundle.parent.mkdir(parents=True, exist_ok=True)
    partial = bundle.with_suffix(".tar.%d" % os.getpid())
    with tarfile.open(partial, "w") as tar:
        tar.add(sdist, arcname="sglang-sdist.tar.gz")
        for wheel in wheels:
            tar.add(wheel, arcname="wheels/" + wheel.name)
    partial.rename(bundle)
print(bundle)
