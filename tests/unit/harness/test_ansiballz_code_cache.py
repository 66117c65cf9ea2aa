"""tests/support/ansiballz_code_cache/: the test hosts' cache of compiled module payload files (the Molecule base
images' .pth file and the harness's sitecustomize.py).

Real parts: a real AnsiballZ payload of ansible.builtin.stat, written by this venv's ansible-core
(ANSIBLE_KEEP_REMOTE_FILES), run by a real Python as Ansible runs it on a host, and real zip archives imported
by CPython's own zipimport. The only change from a test host is that the hook is installed by the child's
command line instead of a .pth file, so the cache can live in the test's directory; the harness's own
sitecustomize.py is tested through the harness itself (run_module).
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys
import textwrap
import zipfile

import pytest

from support import ansible_harness

ROOT = pathlib.Path(__file__).resolve().parents[3]
HOOK_DIR = ROOT / "tests" / "support" / "ansiballz_code_cache"

CHILD = textwrap.dedent("""
    import runpy, sys
    sys.path.insert(0, {hook_dir!r})
    import gpufleet_ansiballz_code_cache as hook
    hook.CACHE_DIR = {cache_dir!r}
    hook.install()
    if {forbid_compile!r}:
        def refuse(pathname, source):
            raise AssertionError("compiled " + pathname)
        hook._compile_uncached = refuse
    {action}
""")


def _run(cache_dir: pathlib.Path, action: str, forbid_compile: bool = False) -> subprocess.CompletedProcess:
    code = CHILD.format(hook_dir=str(HOOK_DIR), cache_dir=str(cache_dir), forbid_compile=forbid_compile, action=action)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def stat_payload(tmp_path_factory) -> pathlib.Path:
    """AnsiballZ_stat.py as ansible-core sends it to a host (kept by ANSIBLE_KEEP_REMOTE_FILES)."""
    work = tmp_path_factory.mktemp("ansiballz")
    env = dict(os.environ, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=str(work / "remote"),
               ANSIBLE_LOCAL_TEMP=str(work / "local"), ANSIBLE_NOCOLOR="1")
    subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.stat",
                    "-a", "path=/etc/hostname", "-e", json.dumps({"ansible_python_interpreter": sys.executable})],
                   env=env, check=True, capture_output=True, text=True, timeout=120)
    payloads = list((work / "remote").glob("*/AnsiballZ_stat.py"))
    assert len(payloads) == 1, payloads
    return payloads[0]


def _run_payload(payload: pathlib.Path, cache_dir: pathlib.Path, forbid_compile: bool = False) -> dict:
    result = _run(cache_dir, f"sys.argv = [{str(payload)!r}]; runpy.run_path({str(payload)!r}, run_name='__main__')", forbid_compile)
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def test_a_real_stat_payload_is_compiled_once_then_runs_from_the_cache_with_the_same_result(stat_payload, tmp_path):
    cache = tmp_path / "cache"
    first = _run_payload(stat_payload, cache)
    assert first["stat"]["exists"] is True and first["stat"]["path"] == "/etc/hostname"
    entries = sorted(cache.iterdir())
    # ansible.module_utils.basic alone brings dozens of files; each one compiled is kept
    assert len(entries) > 20, entries
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert {stat.S_IMODE(entry.stat().st_mode) for entry in entries} == {0o600}

    # With compiling refused, the second run can only succeed from the cache.
    second = _run_payload(stat_payload, cache, forbid_compile=True)
    assert second["stat"] == first["stat"]
    assert sorted(cache.iterdir()) == entries


def test_a_corrupt_or_unwritable_cache_falls_back_to_compiling(stat_payload, tmp_path):
    cache = tmp_path / "cache"
    reference = _run_payload(stat_payload, cache)
    for entry in cache.iterdir():
        entry.write_bytes(b"not marshal data")
    assert _run_payload(stat_payload, cache)["stat"] == reference["stat"]
    # rewritten: a later run needs no compiling
    assert _run_payload(stat_payload, cache, forbid_compile=True)["stat"] == reference["stat"]

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    assert _run_payload(stat_payload, blocked)["stat"] == reference["stat"]
    assert blocked.read_text() == "a file where the cache directory would be"


def _payload_zip(directory: pathlib.Path, name: str, message: str) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / name
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("demo/__init__.py", "")
        handle.writestr("demo/raiser.py", f"def fail():\n    raise RuntimeError({message!r})\n\nVALUE = {message!r}\n")
    return archive


def _import_and_fail(archive: pathlib.Path, cache: pathlib.Path, forbid_compile: bool = False) -> subprocess.CompletedProcess:
    action = (f"sys.path.insert(0, {str(archive)!r}); import demo.raiser; print(demo.raiser.VALUE, flush=True); "
              "demo.raiser.fail()")
    return _run(cache, action, forbid_compile)


def test_tracebacks_name_this_run_s_payload_and_a_changed_source_is_compiled_anew(tmp_path):
    cache = tmp_path / "cache"
    first = _import_and_fail(_payload_zip(tmp_path / "run1", "ansible_demo_payload.zip", "v1"), cache)
    assert first.stdout == "v1\n" and "RuntimeError: v1" in first.stderr

    # Same source in another run's temporary directory: from the cache, and the traceback names the new path.
    archive2 = _payload_zip(tmp_path / "run2", "ansible_demo_payload.zip", "v1")
    second = _import_and_fail(archive2, cache, forbid_compile=True)
    assert second.stdout == "v1\n", second.stderr
    assert f'File "{archive2}/demo/raiser.py", line 2, in fail' in second.stderr
    assert "run1" not in second.stderr

    # A changed source is not served from the cache (compiling refused: the run must fail to import it) ...
    changed = _payload_zip(tmp_path / "run3", "ansible_demo_payload.zip", "v2")
    refused = _import_and_fail(changed, cache, forbid_compile=True)
    assert refused.returncode != 0 and "AssertionError: compiled" in refused.stderr and "v1" not in refused.stdout
    # ... and compiles to the new code when allowed.
    third = _import_and_fail(changed, cache)
    assert third.stdout == "v2\n" and "RuntimeError: v2" in third.stderr


def test_only_ansible_payload_archives_are_cached(tmp_path):
    cache = tmp_path / "cache"
    result = _import_and_fail(_payload_zip(tmp_path / "other", "library.zip", "plain"), cache)
    assert result.stdout == "plain\n"
    assert not cache.exists()


def test_a_cache_that_others_could_write_is_neither_read_nor_written(stat_payload, tmp_path):
    cache = tmp_path / "cache"
    reference = _run_payload(stat_payload, cache)
    entries = sorted(cache.iterdir())
    cache.chmod(0o777)
    # Loading a code object runs it: from a directory others can write, nothing is loaded (compiling is refused
    # here, so a run that loaded nothing must fail) ...
    refused = _run(cache, f"sys.argv = [{str(stat_payload)!r}]; runpy.run_path({str(stat_payload)!r}, run_name='__main__')",
                   forbid_compile=True)
    assert refused.returncode != 0 and "AssertionError: compiled" in refused.stderr
    # ... and nothing is written there either.
    for entry in entries:
        entry.unlink()
    assert _run_payload(stat_payload, cache)["stat"] == reference["stat"]
    assert list(cache.iterdir()) == []


def test_the_harness_s_playbooks_fill_the_cache_and_keep_the_interpreter_s_own_sitecustomize(tmp_path):
    cache = tmp_path / "cache"
    result = ansible_harness.run_module(tmp_path, "ansible.builtin.stat", {"path": "/etc/hostname"},
                                        env={"GPUFLEET_ANSIBALLZ_CODE_CACHE": str(cache)})
    assert result.rc == 0 and result.result["stat"]["exists"] is True, result.stdout + result.stderr
    assert len(list(cache.iterdir())) > 20

    # The directory shadows the interpreter's sitecustomize (Debian's installs apport's hook): that one still runs.
    own = tmp_path / "own_site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("print('the interpreter s own sitecustomize ran')\n")
    env = ansible_harness.ansible_env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(own)
    probe = subprocess.run([sys.executable, "-c", "import zipimport, gpufleet_ansiballz_code_cache as hook; "
                            "print(zipimport._compile_source is hook.compile_source)"],
                           env=env, capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.splitlines() == ["the interpreter s own sitecustomize ran", "True"], probe.stderr
