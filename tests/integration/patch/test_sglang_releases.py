"""The sglang_sm120_patch role (and the python_source_patch module under it) on real SGLang releases.

Each release is downloaded from PyPI at test time (tests/support/pypi.py, cached): sdists up to
0.5.10.post1, compiled wheels after it (the patched files are plain .py in both). The role runs
through ansible-playbook against local "hosts", one per release, each with its own copy of the
release's `sglang` package: no test doubles.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import pathlib
import shutil
import sys
import tarfile
import zipfile

import pytest

from support.ansible_harness import run_playbook
from support.archives import extract_tar
from support.pypi import download

ROOT = pathlib.Path(__file__).resolve().parents[3]
COMM = "srt/distributed/device_communicators"
MIB = 1024 * 1024
SIZES = {2: 64 * MIB, 4: 64 * MIB, 6: 128 * MIB, 8: 128 * MIB}

# What each release holds (read from the real files): the size table's name, the class and file of
# the multimem table, and key 10's world sizes (which key 12 mirrors).
RELEASES = {
    "0.5.4": ("SYMM_MEM_ALL_REDUCE_MAX_SIZES", "symm_mem.py", "SymmMemCommunicator", [6, 8]),
    "0.5.6": ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "torch_symm_mem.py", "TorchSymmMemCommunicator", [6, 8]),
    "0.5.10.post1": ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "torch_symm_mem.py", "TorchSymmMemCommunicator", [6, 8]),
    "0.5.14": ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "torch_symm_mem.py", "TorchSymmMemCommunicator", [6, 8]),
    "0.5.23": ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "torch_symm_mem.py", "TorchSymmMemCommunicator", [4, 6, 8]),
}
FILES = ("all_reduce_utils.py", "torch_symm_mem.py", "symm_mem.py")


def host(version):
    return "sglang_" + version.replace(".", "_")


def unpack(version, dest):
    """Extract the release's device_communicators/*.py (all of them) into DEST/sglang/..."""
    archive = download("sglang", version)
    wanted = "sglang/" + COMM + "/"
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith(wanted) and name.endswith(".py"):
                    zf.extract(name, dest)
    else:
        prefix = "sglang-%s/" % version
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(prefix + wanted) and m.name.endswith(".py")]
            for member in members:
                member.name = member.name[len(prefix):]
            extract_tar(tf, dest, members)
    package = dest / "sglang"
    assert (package / COMM / "all_reduce_utils.py").is_file(), "release %s lacks all_reduce_utils.py" % version
    return package


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Unpacked, untouched copies of every release (read-only reference)."""
    base = tmp_path_factory.mktemp("pristine")
    return {v: unpack(v, base / v) for v in RELEASES}


def snapshot(package):
    return {f: (package / COMM / f).read_bytes() for f in FILES if (package / COMM / f).exists()}


def copy_releases(pristine, dest):
    out = {}
    for version, package in pristine.items():
        out[version] = dest / version / "sglang"
        shutil.copytree(package, out[version])
    return out


def run_role(packages, tmp_path, *extra, role_vars=None):
    """Run the role on one local host per release; return (rc, parsed json callback output)."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    inventory = {"all": {"hosts": {host(v): {
        "ansible_connection": "local", "ansible_python_interpreter": python,
        "sglang_sm120_patch_target_dir": str(p),
        # the restart-pending marker (issue 17) in the test's directory, never this machine's /var/lib
        "sglang_sm120_patch_restart_marker": str(tmp_path / "state" / ("restart-pending-" + host(v)))}
        for v, p in packages.items()}}}
    playbook = [{"name": "SM120 patch", "hosts": "all", "gather_facts": False, "vars": role_vars or {},
                 "roles": [{"role": "gpufleet.llm_server.sglang_sm120_patch"}]}]
    run = run_playbook(tmp_path, playbook, inventory=inventory, connection=None, args=extra,
                       env={"ANSIBLE_FORKS": "5"})
    assert run.output, run.stdout + run.stderr
    return run.rc, run.output


def task_results(output, name):
    for play in output["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ")[-1] == name:
                return task["hosts"]
    raise AssertionError("task %r not in the output" % name)


def facts(output, hostname):
    found = {}
    for task in ("Report the capability keys present", "Report the capabilities every table covers"):
        found.update(task_results(output, task)[hostname]["ansible_facts"])
    return found


def tables(package, version):
    """Key 10 and 12 of both tables, read from the patched files (sizes by running the module file)."""
    sizes_symbol, multimem_file, cls = RELEASES[version][:3]
    namespace = {}
    exec(compile((package / COMM / "all_reduce_utils.py").read_bytes(), "all_reduce_utils.py", "exec"), namespace)  # noqa: S102
    sizes = namespace[sizes_symbol]
    tree = ast.parse((package / COMM / multimem_file).read_bytes())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(s.value for s in klass.body if isinstance(s, ast.Assign) and s.targets[0].id == "_WORLD_SIZES_MULTIMEM")
    return sizes, ast.literal_eval(node)


def only_insertions(before, after):
    ops = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False).get_opcodes()
    return all(op[0] in ("equal", "insert") for op in ops)


def test_releases_have_no_key_12_upstream(pristine):
    for version, package in pristine.items():
        sizes, multimem = tables(package, version)
        assert 12 not in sizes and 12 not in multimem, version
        assert sizes[10] == SIZES and multimem[10] == RELEASES[version][3], version


def test_patch_every_release_then_nothing_changes(pristine, tmp_path):
    packages = copy_releases(pristine, tmp_path / "trees")
    rc, out = run_role(packages, tmp_path, "--diff")
    assert rc == 0, json.dumps(out["stats"])
    for version, package in packages.items():
        name = host(version)
        sizes_symbol, multimem_file, cls, multimem_10 = RELEASES[version]
        assert out["stats"][name]["changed"] >= 1 and out["stats"][name]["failures"] == 0
        for filename, data in snapshot(package).items():
            compile(data, filename, "exec")
            assert only_insertions(pristine[version].joinpath(COMM, filename).read_text(), data.decode()), filename
        sizes, multimem = tables(package, version)
        assert sizes[12] == sizes[10] == SIZES, version
        assert multimem[12] == multimem[10] == multimem_10, version
        found = facts(out, name)
        assert found["sglang_sm120_patch_changed"] is True
        assert found["sglang_sm120_patch_keys"]["all_reduce_max_sizes"]["symbol"] == sizes_symbol
        assert found["sglang_sm120_patch_keys"]["world_sizes_multimem"]["symbol"] == cls + "._WORLD_SIZES_MULTIMEM"
        assert found["sglang_sm120_patch_keys"]["world_sizes_multimem"]["path"].endswith("/" + multimem_file)
        assert found["sglang_sm120_patch_capabilities"] == [9, 10, 12]
        backups = [p for p in (package / COMM).iterdir() if p.name.endswith("~")]
        assert len(backups) == 2, backups
    after_first = {v: snapshot(p) for v, p in packages.items()}

    rc, out = run_role(packages, tmp_path)
    assert rc == 0
    for version, package in packages.items():
        assert out["stats"][host(version)]["changed"] == 0, version
        assert snapshot(package) == after_first[version], version
        assert facts(out, host(version))["sglang_sm120_patch_capabilities"] == [9, 10, 12]


def test_check_mode_reports_and_writes_nothing(pristine, tmp_path):
    packages = copy_releases({v: pristine[v] for v in ("0.5.10.post1", "0.5.23")}, tmp_path / "trees")
    rc, out = run_role(packages, tmp_path, "--check", "--diff")
    assert rc == 0, json.dumps(out["stats"])
    for version, package in packages.items():
        assert out["stats"][host(version)]["changed"] >= 1
        assert snapshot(package) == snapshot(pristine[version])
        keys = facts(out, host(version))["sglang_sm120_patch_keys"]
        assert keys["all_reduce_max_sizes"]["pending"] and keys["all_reduce_max_sizes"]["keys"] == [9, 10]
        diff = task_results(out, "Ensure the SM120 entries")[host(version)]["results"][0]["diff"]
        assert "12: {" in diff["after"] and "12: {" not in diff["before"]


def test_renamed_dict_fails_and_changes_nothing(pristine, tmp_path):
    packages = copy_releases(pristine, tmp_path / "trees")
    for version, package in packages.items():
        path = package / COMM / "all_reduce_utils.py"
        path.write_bytes(path.read_bytes().replace(b"SYMM_MEM_ALL_REDUCE_MAX_SIZES", b"SYMM_MEM_AR_LIMITS"))
    before = {v: snapshot(p) for v, p in packages.items()}
    rc, out = run_role(packages, tmp_path)
    assert rc != 0
    failed = task_results(out, "Check every patch target before changing any file")
    for version, package in packages.items():
        name = host(version)
        assert out["stats"][name]["failures"] == 1 and out["stats"][name]["changed"] == 0
        message = failed[name]["results"][0]["msg"]
        assert str(package / COMM / "all_reduce_utils.py") in message
        assert RELEASES[version][0] in message and "SYMM_MEM_AR_LIMITS (line 3)" in message
        assert snapshot(package) == before[version], version


# ---------------------------------------------------------------------------------------------
# The table moved: a later SGLang main defines TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES in
# torch_symm_mem.py itself (and indexes it with []). These layouts are built from the real release
# files by moving the table, as a refactor upstream would; "stale" keeps the old copy behind in
# all_reduce_utils.py, which the communicator no longer reads.
# ---------------------------------------------------------------------------------------------
IMPORT_BLOCK = (b"from sglang.srt.distributed.device_communicators.all_reduce_utils import (\n"
                b"    TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,\n)\n")


def move_table(package, keep_copy):
    """Move the size table (and MiB) from all_reduce_utils.py into torch_symm_mem.py, in place."""
    utils = package / COMM / "all_reduce_utils.py"
    reader = package / COMM / "torch_symm_mem.py"
    table = utils.read_bytes()
    assert table.startswith(b"MiB = 1024 * 1024\n"), "all_reduce_utils.py changed upstream: adapt move_table"
    source = reader.read_bytes()
    assert source.count(IMPORT_BLOCK) == 1, "torch_symm_mem.py's import changed upstream: adapt move_table"
    reader.write_bytes(source.replace(IMPORT_BLOCK, table))
    if keep_copy:
        return
    utils.write_bytes(b"# The size table moved to torch_symm_mem.py.\n")


def local_table(package):
    """The dict torch_symm_mem.py defines itself, evaluated the way the module's own code would see it."""
    tree = ast.parse((package / COMM / "torch_symm_mem.py").read_bytes())
    wanted = [n for n in tree.body if isinstance(n, ast.Assign)
              and getattr(n.targets[0], "id", "") in ("MiB", "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")]
    namespace = {}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "torch_symm_mem.py", "exec"), namespace)  # noqa: S102
    return namespace["TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"]


@pytest.mark.parametrize("keep_copy", [False, True], ids=["moved", "moved-with-stale-copy"])
def test_table_defined_in_the_reader_is_the_one_patched(pristine, tmp_path, keep_copy):
    versions = ("0.5.10.post1", "0.5.23")
    packages = copy_releases({v: pristine[v] for v in versions}, tmp_path / "trees")
    for package in packages.values():
        move_table(package, keep_copy)
    utils_before = {v: (p / COMM / "all_reduce_utils.py").read_bytes() for v, p in packages.items()}
    rc, out = run_role(packages, tmp_path)
    assert rc == 0, json.dumps(out["stats"])
    applied = task_results(out, "Ensure the SM120 entries")
    for version, package in packages.items():
        sizes = local_table(package)
        assert sizes[12] == sizes[10] == SIZES, version
        # the copy the communicator does not read is left exactly as it was
        assert (package / COMM / "all_reduce_utils.py").read_bytes() == utils_before[version]
        keys = facts(out, host(version))["sglang_sm120_patch_keys"]["all_reduce_max_sizes"]
        assert keys["path"] == str(package / COMM / "torch_symm_mem.py")
        assert keys["read_by"]["path"] == str(package / COMM / "torch_symm_mem.py")
        assert keys["keys"] == [9, 10, 12]
        result = applied[host(version)]["results"][0]
        assert result["chain"] == []
        if keep_copy:
            assert keys["stale_copies"] == [str(package / COMM / "all_reduce_utils.py")]
            warnings = " ".join(applied[host(version)].get("warnings", []))
            assert "all_reduce_utils.py line 3 also defines TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES (keys 9, 10)" in warnings
            assert "torch_symm_mem.py" in warnings and "left unchanged" in warnings
        else:
            assert keys["stale_copies"] == []
    rc, out = run_role(packages, tmp_path)
    assert rc == 0 and all(out["stats"][host(v)]["changed"] == 0 for v in versions)


def test_release_layout_patches_the_imported_table_and_names_the_reader(pristine, tmp_path):
    packages = copy_releases({"0.5.10.post1": pristine["0.5.10.post1"]}, tmp_path / "trees")
    rc, out = run_role(packages, tmp_path)
    assert rc == 0
    result = task_results(out, "Ensure the SM120 entries")[host("0.5.10.post1")]["results"][0]
    package = packages["0.5.10.post1"]
    assert result["path"] == str(package / COMM / "all_reduce_utils.py")
    assert result["read_by"] == {"path": str(package / COMM / "torch_symm_mem.py"),
                                 "symbol": "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"}
    assert result["chain"] == ["%s line 9 imports TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES from %s" % (
        package / COMM / "torch_symm_mem.py", package / COMM / "all_reduce_utils.py")]


@pytest.mark.parametrize("layout, words", [
    # A merge left both: the import, then a local definition that overrides it at run time.
    ("import-and-local", ["torch_symm_mem.py binds TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES 2 times",
                          "line 9: imported from sglang.srt.distributed.device_communicators.all_reduce_utils",
                          "a dict literal"]),
    # The reader imports the table from a module that builds it with a call: nothing to edit there.
    ("built-by-a-call", ["torch_symm_mem.py reads TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES from",
                         "all_reduce_utils.py line", "assigned a Call, not a dict literal"]),
])
def test_unfollowable_layouts_are_refused_naming_both_files(pristine, tmp_path, layout, words):
    packages = copy_releases({"0.5.10.post1": pristine["0.5.10.post1"]}, tmp_path / "trees")
    package = packages["0.5.10.post1"]
    reader = package / COMM / "torch_symm_mem.py"
    utils = package / COMM / "all_reduce_utils.py"
    if layout == "import-and-local":
        source = reader.read_bytes()
        reader.write_bytes(source.replace(IMPORT_BLOCK, IMPORT_BLOCK + utils.read_bytes()))
    else:
        utils.write_bytes(utils.read_bytes().replace(b"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = {",
                                                     b"_SIZES = {") + b"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = dict(_SIZES)\n")
    before = snapshot(package)
    rc, out = run_role(packages, tmp_path)
    assert rc != 0
    message = task_results(out, "Check every patch target before changing any file")[host("0.5.10.post1")]["results"][0]["msg"]
    for word in words:
        assert word in message, message
    assert str(reader) in message and str(utils) in message
    assert snapshot(package) == before
    assert out["stats"][host("0.5.10.post1")]["changed"] == 0
