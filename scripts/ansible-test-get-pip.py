"""Offline stand-in for pypa's get-pip.py, used by ansible-test to put pip into its sanity venvs.

ansible-test downloads get-pip.py from ci-files.testing.ansible.com, which the development and CI
machines cannot reach; it uses a cached copy at ~/.ansible/test/cache/get_pip_<version>.py when
one exists, and scripts/ansible-test-sanity.sh places this file there. Like get-pip.py it is run
as __main__ inside the target venv with pip-install arguments (`pip==X ... --no-setuptools
--no-wheel`): it seeds pip from the interpreter's own ensurepip, then lets pip install the pinned
packages from PyPI.
"""

import subprocess
import sys

GET_PIP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args)


if __name__ == "__main__":
    main()
