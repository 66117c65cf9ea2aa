"""Offline stand-in for pypa's get-pip.py, used by ansible-test to put pip into its sanity venvs.

ansible-test downloads get-pip.py from ci-files.testing.ansible.com, which the development and CI
machines cannot reach; it uses a cached copy at ~/.ansible/test/cache/get_pip_<version>.py when
one exists, and scripts/ansible-test-sanity.sh places this file there. Like get-pip.py it is run
as __main__ inside the target venv with pip-install arguments (`pip==X ... --no-setuptools
--no-wheel`) and leaves that venv with pip X and nothing else.

How: the pip of the project's venv (ansible-test-sanity.sh writes its python into SEED_PIP_PYTHON
below when it places the file) installs pip X into the target venv with `pip --python`. Without it
(or with a pip older than 22.3, which lacks --python) the interpreter's own ensurepip seeds pip first.
The seed costs: ensurepip 3.4 CPU s per venv, then pip X 1.4 s; the outer pip 1.5 s in all
(issue 36, 2026-12-06; ten venvs per cold sanity run).
"""

import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}
SEED_PIP_PYTHON = ""


def outer_pip_works(python):
    if not python or not os.access(python, os.X_OK):
        return False
    probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return False
    version = tuple(int(part) for part in probe.stdout.split()[1].split(".")[:2] if part.isdigit())
    return version >= (22, 3)


def main():
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    if outer_pip_works(SEED_PIP_PYTHON):
        subprocess.check_call([SEED_PIP_PYTHON, "-m", "pip", "--python", sys.executable, "install", "--quiet"] + args)
        return
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args)
    # ensurepip of Python < 3.12 also installs setuptools, which get-pip.py leaves out when told to.
    if "--no-setuptools" in sys.argv[1:]:
        subprocess.check_call([sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"],
                              stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
