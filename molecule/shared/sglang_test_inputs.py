"""Bundle what Molecule's prepare copies into the containers; print the bundle's path.

The containers reach no package index (no registry trust there), so everything pip needs comes
from here, laid out like production's two indexes:

- ``sglang-sdist.tar.gz``: the real SGLang release sdist the stand-in repository is built from;
- ``pypi/``: a PEP 503 "simple" index (``pypi/simple/<project>/index.html`` -> ``pypi/files``) of real
  PyPI wheels for Python 3.11 (Debian 12) and 3.13 (Debian 13): SGLang's build backend, the small
  real dependencies the stand-in repository declares (``STANDIN_DEPENDENCIES``), and huggingface_hub
  (what model_download needs in the SGLang environment), each with its own dependencies;
- ``torch/``: a simple index holding only the torch stand-in ``torch==2.9.1+gpufleet.standin``
  (tests/support/standin_torch, a documented test double: a real torch wheel is several GB), which
  the role installs through sglang_build_torch_index_url as it would PyTorch's CUDA index;
- ``torch-tuned/``: the stand-in ``torch==2.9.0+gpufleet.tuned`` wheel, installed in prepare as the
  hand-tuned torch a host already has (the role must keep it).

usage: python3 sglang_test_inputs.py [SGLANG_VERSION]   (default 0.5.10.post1; run on the controller)
Downloads: tests/support/pypi.py for the sdist, `pip download` for the wheels, both cached under
$GPUFLEET_CACHE; pip runs with PIP_CONFIG_FILE=/dev/null, so this machine's pip configuration
(constraints, extra find-links) does not leak into the bundle.
"""

import hashlib
import html
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from support.pypi import CACHE, download  # noqa: E402  pylint: disable=wrong-import-position

# build-system.requires of SGLang 0.5.10.post1 (setuptools>=61.0, setuptools-scm>=8.0, wheel), of main's
# Rust-era tree (adds setuptools-rust>=1.10: tests/support/upstream_main) and the stand-in torch's
# (setuptools>=70.1), pinned; pip download brings setuptools-rust's own dependency (semantic_version).
BUILD = ["setuptools==84.2.1", "setuptools-scm==10.3.4", "wheel==0.48.0", "setuptools-rust==1.13.0"]
# What the stand-in repository's pyproject.toml declares besides torch (molecule/shared/make_standin_repo.sh):
# small, real, pure-Python projects, one with a dependency of its own (python-dateutil -> tzdata).
STANDIN_DEPENDENCIES = ["python-dateutil==4.0.0", "idna==3.20"]
# sglang_build_tool_requirements' default: model_download's helper imports huggingface_hub.
TOOLS = ["huggingface_hub==2.4.0"]
PYTHONS = ["3.11", "3.13"]
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]
TORCH = {"torch": "2.9.1+gpufleet.standin", "torch-tuned": "2.9.0+gpufleet.tuned"}


def pip_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({k: os.environ[k] for k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT") if k in os.environ})
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def simple_index(root):
    """Write root/simple/<project>/index.html for every wheel in root/files (PEP 503)."""
    projects = {}
    for wheel in sorted((root / "files").glob("*.whl")):
        projects.setdefault(canonical(wheel.name.split("-")[0]), []).append(wheel.name)
    for project, files in projects.items():
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = "\n".join('<a href="../../files/%s">%s</a><br/>' % (html.escape(f), html.escape(f)) for f in files)
        page.write_text("<!DOCTYPE html>\n<html><body>\n%s\n</body></html>\n" % links)


def torch_wheel(version, wheels, dest):
    """Build the stand-in torch at VERSION (offline, setuptools from WHEELS) into DEST."""
    with tempfile.TemporaryDirectory() as work:
        source = pathlib.Path(work) / "torch-standin"
        shutil.copytree(ROOT / "tests" / "support" / "standin_torch", source)
        pyproject = source / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('version = "0.0.0+gpufleet.standin"', 'version = "%s"' % version))
        init = source / "torch" / "version.py"
        init.write_text(init.read_text().replace('"0.0.0+gpufleet.standin"', '"%s"' % version))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--find-links", str(wheels),
                        "-w", str(dest), str(source)], env=pip_env(), check=True)


def main():
    version = sys.argv[1] if len(sys.argv) > 1 else "0.5.10.post1"
    sdist = download("sglang", version, prefer="sdist")
    if not sdist.name.endswith(".tar.gz"):
        sys.exit("sglang %s has no sdist on PyPI (got %s); releases after 0.5.10.post1 ship wheels only" % (version, sdist.name))
    source_hash = hashlib.sha256()
    for path in sorted((ROOT / "tests" / "support" / "standin_torch").rglob("*")):
        if path.is_file():
            source_hash.update(path.name.encode() + path.read_bytes())
    key = hashlib.sha256(repr((version, BUILD, STANDIN_DEPENDENCIES, TOOLS, PYTHONS, TORCH,
                               source_hash.hexdigest(), pathlib.Path(__file__).read_bytes())).encode()).hexdigest()[:16]
    bundle = CACHE / "molecule" / ("sglang-test-inputs-%s-%s.tar" % (version, key))
    if bundle.exists():
        print(bundle)
        return
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=bundle.parent) as work:
        work = pathlib.Path(work)
        files = work / "pypi" / "files"
        for python in PYTHONS:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
                            *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
                            "-d", str(files), *BUILD, *STANDIN_DEPENDENCIES, *TOOLS], env=pip_env(), check=True)
        simple_index(work / "pypi")
        for folder, torch_version in TORCH.items():
            torch_wheel(torch_version, files, work / folder / "files")
        simple_index(work / "torch")
        partial = bundle.with_suffix(".tar.%d" % os.getpid())
        with tarfile.open(partial, "w") as tar:
            tar.add(sdist, arcname="sglang-sdist.tar.gz")
            for folder in ("pypi", "torch", "torch-tuned"):
                tar.add(work / folder, arcname=folder)
        partial.rename(bundle)
    print(bundle)


if __name__ == "__main__":
    main()
