"""roles/sglang_build/files/sglang_verify.py on small package trees written here.

The script runs the way the role runs it (the target interpreter, PYTHONPATH at the build); the
trees are laid out like a build (<build>/src/python/sglang, <build>/meta) with a launch_server
whose --help is a real argparse parser, so the option strings parsed are argparse's own output.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "roles" / "sglang_build" / "files" / "sglang_verify.py"

LAUNCH = '''
import argparse
p = argparse.ArgumentParser(prog="sglang.launch_server")
p.add_argument("--model-path", "--model", dest="model_path")
p.add_argument("--tp-size", "--tensor-parallel-size", type=int)
p.add_argument("--enable-torch-symm-mem", action="store_true")
if __name__ == "__main__":
    p.parse_args()
'''


def build(root, name="b1", extra_module=""):
    package = root / "builds" / name / "src" / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "srt" / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(LAUNCH)
    (package / "srt" / "http_server.py").write_text(extra_module)
    meta = root / "builds" / name / "meta" / "sglang-0.5.10.post1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.10.post1\n")
    return root / "builds" / name


def verify(root, tree, *args, python=sys.executable):
    env = {"PYTHONPATH": os.pathsep.join([str(tree / "src" / "python"), str(tree / "meta")])}
    proc = subprocess.run([str(python), "-s", str(SCRIPT), "--root", str(root / "builds"), "--root", str(root / "current"),
                           *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def test_a_good_build(tmp_path):
    tree = build(tmp_path)
    found = verify(tmp_path, tree, "--module", "sglang.launch_server", "--module", "sglang.srt.http_server",
                   "--flag=--model-path", "--flag=--tensor-parallel-size", "--flag=--enable-torch-symm-mem")
    assert found["origin"] == str(tree / "src" / "python" / "sglang" / "__init__.py")
    assert found["version"] == "0.5.10.post1" and found["foreign"] == []
    assert [i["error"] for i in found["imports"]] == [None, None]
    assert found["help"]["rc"] == 0 and found["help"]["missing"] == []
    assert {"--model", "--model-path", "--tp-size", "--tensor-parallel-size", "--help"} <= set(found["help"]["flags"])


def test_missing_flag_and_failed_import_are_reported(tmp_path):
    tree = build(tmp_path, extra_module="import numpy_not_installed_here\n")
    found = verify(tmp_path, tree, "--module", "sglang.srt.http_server", "--flag=--hicache-ratio")
    error = found["imports"][0]["error"]
    assert error.startswith("ModuleNotFoundError: No module named 'numpy_not_installed_here'") and "http_server.py line 1" in error
    assert found["help"] is None  # --help only runs once every import worked
    found = verify(tmp_path, build(tmp_path, "b2"), "--flag=--hicache-ratio", "--flag=--tp-size")
    assert found["help"]["missing"] == ["--hicache-ratio"]


def test_a_copy_in_site_packages_is_foreign(tmp_path):
    """A hand-made install (a plain copy in the venv's site-packages) would shadow the build once
    PYTHONPATH is gone: the server's environment has no PYTHONPATH, and site-packages comes first."""
    tree = build(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("")
    (site / "gpufleet-sglang.pth").write_text(str(tmp_path / "current" / "src" / "python") + "\n")
    found = verify(tmp_path, tree, python=python)
    assert found["origin"] == str(tree / "src" / "python" / "sglang" / "__init__.py")  # PYTHONPATH wins here ...
    assert found["foreign"] == [str(site / "sglang" / "__init__.py")]  # ... but not where the server runs
