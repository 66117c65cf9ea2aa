"""Verify one SGLang build in the environment that will run it; print one JSON object.

Run by the gpufleet.llm_server.sglang_build role with the target interpreter and PYTHONPATH set to
the build (<build>/src/python:<build>/meta), so the new build is checked before `current` points
at it:

    sglang_verify.py --root DIR [--root DIR ...] [--module NAME ...] [--flag=--x ...] [--timeout S]

- where `sglang` imports from (the role compares it with the build) and its version (package metadata);
- copies of sglang that would shadow the build once PYTHONPATH is gone (a pip install in
  site-packages, an editable finder): anything outside the ROOTs (the builds folder, the current link);
- the real import of each --module (SGLang's server entry point and what it loads), each error
  with the exception's last line;
- for an import that failed because the dynamic loader found no shared object ("libnuma.so.1: cannot open
  shared object file"), each such object and what provides it (--shared-objects: the role's
  files/shared_objects.json, derived from the real wheels' ELF NEEDED entries);
- `python -m sglang.launch_server --help` (only when every import worked): the option strings it
  lists and which --flag values are missing from them.
"""

import argparse
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
import traceback

parser = argparse.ArgumentParser()
parser.add_argument("--root", action="append", required=True)
parser.add_argument("--module", action="append", default=[])
parser.add_argument("--flag", action="append", default=[])
parser.add_argument("--timeout", type=float, default=600)
parser.add_argument("--shared-objects", default="{}")
args = parser.parse_args()
shared_objects = json.loads(args.shared_objects)
MISSING_OBJECT = re.compile(r"([A-Za-z0-9_.+-]+\.so(?:\.[0-9]+)*): cannot open shared object file")


def missing_objects(exc):
    """[{object, provider, fix}] for every shared object the loader could not find, in EXC and what it chains
    (sgl_kernel catches each load failure and raises one ImportError listing them)."""
    found, seen, todo = [], set(), [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        for name in MISSING_OBJECT.findall(str(current)):
            if name not in [f["object"] for f in found]:
                known = shared_objects.get(name) if isinstance(shared_objects.get(name), dict) else {}
                found.append({"object": name, "provider": known.get("provider"), "package": known.get("package"),
                              "fix": known.get("fix") or "no package of the role's list provides it: install what ships it"})
        todo.extend([current.__cause__, current.__context__])
    return found


roots = [os.path.abspath(r) for r in args.root]
result = {"python": sys.version.split()[0], "executable": sys.executable, "purelib": sysconfig.get_paths()["purelib"],
          "origin": None, "version": None, "foreign": [], "imports": [], "help": None}


def inside(path):
    return path is not None and any((os.path.abspath(path) + os.sep).startswith(r + os.sep) for r in roots)


spec = importlib.util.find_spec("sglang")
if spec is not None:
    result["origin"] = spec.origin
try:
    result["version"] = importlib.metadata.version("sglang")
except importlib.metadata.PackageNotFoundError:
    pass

# What the server would import once PYTHONPATH is gone: every sys.path entry outside the builds,
# and the meta-path finders that editable installs add.
pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
for entry in sys.path:
    if not entry or entry in pythonpath or inside(entry):
        continue
    found = importlib.machinery.PathFinder.find_spec("sglang", [entry])
    if found is not None:
        result["foreign"].append(found.origin or ", ".join(found.submodule_search_locations or []) or entry)
for finder in sys.meta_path:
    if type(finder).__module__ in ("_frozen_importlib", "_frozen_importlib_external") or finder is importlib.machinery.PathFinder:
        continue
    try:
        found = finder.find_spec("sglang", None)
    except Exception:  # pylint: disable=broad-exception-caught  # a broken finder is not ours to judge
        found = None
    if found is not None and not inside(found.origin):
        result["foreign"].append("%s (import hook %s)" % (found.origin, type(finder).__name__))
for dist in importlib.metadata.distributions():
    if (dist.metadata.get("Name") or "").lower() == "sglang":
        location = str(dist.locate_file(""))
        if not inside(location) and location not in pythonpath:
            result["foreign"].append("%s (package metadata sglang %s)" % (location, dist.version))

ok = result["origin"] is not None
for name in args.module:
    started = time.monotonic()
    entry = {"module": name, "error": None, "file": None, "missing_objects": []}
    try:
        module = importlib.import_module(name)
        entry["file"] = getattr(module, "__file__", None)
    except BaseException as exc:  # pylint: disable=broad-exception-caught  # SystemExit too: reported, the role fails on it
        last = traceback.extract_tb(exc.__traceback__)[-1:] or [None]
        where = (" (%s line %s)" % (last[0].filename, last[0].lineno)) if last[0] else ""
        entry["error"] = "%s: %s%s" % (type(exc).__name__, exc, where)
        entry["missing_objects"] = missing_objects(exc)
        ok = False
    entry["seconds"] = round(time.monotonic() - started, 2)
    result["imports"].append(entry)

if ok:
    started = time.monotonic()
    help_result = {"rc": None, "flags": [], "missing": [], "tail": "", "seconds": None}
    try:
        proc = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--help"], capture_output=True, text=True,
                              timeout=args.timeout, check=False)
        help_result["rc"] = proc.returncode
        text = proc.stdout + "\n" + proc.stderr
        found = set(re.findall(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)", proc.stdout))
        help_result["flags"] = sorted(found)
        help_result["missing"] = [f for f in args.flag if f not in found]
        help_result["tail"] = text.strip()[-1500:]
    except subprocess.TimeoutExpired:
        help_result["tail"] = "timed out after %s s" % args.timeout
    help_result["seconds"] = round(time.monotonic() - started, 2)
    result["help"] = help_result

print(json.dumps(result))
