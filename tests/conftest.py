"""Shared pytest setup: make `ansible_collections.gpufleet.llm_server` importable from the checkout.

`make venv` links this checkout at .collections/ansible_collections/gpufleet/llm_server; the
collection's module_utils are imported by their real FQCN path, exactly as Ansible imports them.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".collections"
LINK = COLLECTIONS / "ansible_collections" / "gpufleet" / "llm_server"
if not LINK.exists():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(ROOT, LINK)
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
