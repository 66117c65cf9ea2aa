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


def test_a_missing_shared_object_is_named_with_its_provider(tmp_path):
    """Real ELF objects, built here with gcc: a Python extension module whose NEEDED entries are libnuma.so.1
    and libcuda.so.1 (as sgl_kernel/sm100/common_ops.abi3.so of sgl-kernel 0.3.21, `readelf -d`), linked
    against empty stand-in libraries of those names that are then removed, so the real dynamic loader
    reports the first one missing. sgl_kernel catches that error and raises its own ImportError listing it;
    the module here does the same. The providers come from the role's files/shared_objects.json."""
    import shutil
    import sysconfig
    gcc = shutil.which("gcc")
    assert gcc, "this test needs gcc (make test's setup installs it)"
    libs = tmp_path / "libs"
    libs.mkdir()
    (tmp_path / "empty.c").write_text("int gpufleet_stub(void) { return 0; }\n")
    for soname in ("libnuma.so.1", "libcuda.so.1"):
        subprocess.run([gcc, "-shared", "-fPIC", "-o", str(libs / soname), "-Wl,-soname," + soname,
                        str(tmp_path / "empty.c")], check=True)
    (tmp_path / "ops.c").write_text(
        "#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"common_ops\", 0, -1, 0};\n"
        "PyMODINIT_FUNC PyInit_common_ops(void) { return PyModule_Create(&m); }\n")
    tree = build(tmp_path, extra_module=(
        "import importlib.util, os\n"
        "path = os.path.join(os.path.dirname(__file__), 'common_ops.so')\n"
        "try:\n"
        "    spec = importlib.util.spec_from_file_location('common_ops', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "except Exception as e:\n"
        "    raise ImportError('[sgl_kernel] CRITICAL: Could not load any common_ops library!\\n- %s: %s'"
        " % (type(e).__name__, e))\n"))
    subprocess.run([gcc, "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-o",
                    str(tree / "src" / "python" / "sglang" / "srt" / "common_ops.so"), str(tmp_path / "ops.c"),
                    "-Wl,--no-as-needed", "-L", str(libs), "-l:libnuma.so.1", "-l:libcuda.so.1"], check=True)
    shutil.rmtree(libs)
    objects = (SCRIPT.parent / "shared_objects.json").read_text()
    found = verify(tmp_path, tree, "--module", "sglang.srt.http_server", "--shared-objects", objects)
    entry = found["imports"][0]
    assert "cannot open shared object file" in entry["error"]
    names = [o["object"] for o in entry["missing_objects"]]
    # the loader stops at the first NEEDED entry it cannot find: libnuma.so.1 where the host has no libnuma1
    # (this machine may have it: then libcuda.so.1, the driver's, is the one named)
    assert names and names[0] in ("libnuma.so.1", "libcuda.so.1"), entry
    missing = entry["missing_objects"][0]
    if missing["object"] == "libnuma.so.1":
        assert missing["package"] == "libnuma1" and "libnuma1" in missing["fix"]
    else:
        assert missing["provider"] == "nvidia-driver"
        assert missing["fix"].startswith("the NVIDIA driver provides this: run the nvidia_driver role first")
    assert found["help"] is None


def test_the_shared_object_table_names_a_provider_for_every_object_of_the_real_wheels():
    """Every entry says who provides it and where the mapping came from; libnuma.so.1 maps to libnuma1, and
    libcuda.so.1 to the driver, as readelf showed on the real wheels (the table's _about)."""
    table = json.loads((SCRIPT.parent / "shared_objects.json").read_text())
    entries = {k: v for k, v in table.items() if not k.startswith("_")}
    assert entries["libnuma.so.1"]["package"] == "libnuma1"
    assert entries["libcuda.so.1"]["provider"] == "nvidia-driver"
    for name, entry in entries.items():
        assert entry["provider"] in ("os-package", "nvidia-driver", "python-wheel"), name
        assert entry["fix"] and entry["source"], name
        assert (entry["package"] is not None) == (entry["provider"] == "os-package"), name
