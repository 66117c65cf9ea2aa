"""scripts/ansible-test-get-pip.py: the offline get-pip.py that ansible-test runs in each empty sanity venv.

Real parts: a real `python -m venv --without-pip`, as ansible-test makes it, and real pip installing pip from
PyPI (the version ansible-test pins, read from its own source as scripts/ansible-test-sanity.sh reads it).
The seeding pip is this test run's own (the project venv's, as in sanity), behind a wrapper that records that
it was asked, so the test sees which way the venv got its pip.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import ansible_test

ROOT = pathlib.Path(__file__).resolve().parents[3]
STAND_IN = ROOT / "scripts" / "ansible-test-get-pip.py"
ANSIBLE_TEST_REQUIREMENTS = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
PINNED_PIP = re.search(r"pip='([0-9.]+)'", ANSIBLE_TEST_REQUIREMENTS.read_text()).group(1)
# What ansible-test's bootstrap passes (ansible_test/_util/target/setup/requirements.py: common_pip_options(),
# the packages, then the two get-pip.py-only options).
BOOTSTRAP_ARGS = ["--disable-pip-version-check", f"pip=={PINNED_PIP}", "--no-setuptools", "--no-wheel"]


def _stand_in_with_seed(tmp_path: pathlib.Path, seed: str) -> pathlib.Path:
    """The file as ansible-test-sanity.sh places it: SEED_PIP_PYTHON filled in (or left empty)."""
    text = STAND_IN.read_text()
    assert 'SEED_PIP_PYTHON = ""\n' in text  # the line ansible-test-sanity.sh's sed fills in
    path = tmp_path / f"get_pip_{PINNED_PIP.replace('.', '_')}.py"
    path.write_text(text.replace('SEED_PIP_PYTHON = ""\n', f"SEED_PIP_PYTHON = {json.dumps(seed)}\n"))
    return path


def _empty_venv(tmp_path: pathlib.Path) -> pathlib.Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def _installed(python: pathlib.Path) -> dict[str, str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                             capture_output=True, text=True, check=True).stdout
    return {package["name"].lower(): package["version"] for package in json.loads(listing)}


def test_the_project_pip_seeds_the_venv_with_the_pinned_pip_alone(tmp_path):
    calls = tmp_path / "seed-calls"
    seed = tmp_path / "seed-python"
    seed.write_text(f'#!/bin/sh\necho "$*" >>{calls}\nexec {sys.executable} "$@"\n')
    seed.chmod(0o755)
    python = _empty_venv(tmp_path)
    subprocess.run([str(python), str(_stand_in_with_seed(tmp_path, str(seed))), *BOOTSTRAP_ARGS], check=True,
                   env=dict(os.environ, PIP_NO_INPUT="1"))
    assert _installed(python) == {"pip": PINNED_PIP}
    install = [line for line in calls.read_text().splitlines() if " install " in line]
    assert install == [f"-m pip --python {python} install --quiet --disable-pip-version-check pip=={PINNED_PIP}"]


def test_without_a_usable_seed_the_interpreters_ensurepip_seeds_it(tmp_path):
    python = _empty_venv(tmp_path)
    missing = tmp_path / "no-such-python"
    subprocess.run([str(python), str(_stand_in_with_seed(tmp_path, str(missing))), *BOOTSTRAP_ARGS], check=True)
    assert _installed(python) == {"pip": PINNED_PIP}
