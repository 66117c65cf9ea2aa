"""The CPU test engine is portable and a broken one reads as an infrastructure error (issue 12).

The instruction scan is checked on real machine code: gcc compiles the same loop for AVX2, for
AVX-512 and with an AMX instruction, and the scan must tell them apart. The built engine itself
(tests/support/llama_engine.py, cached) must carry no AVX-512/AMX instruction and have passed its
completion self-check.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from support import llama_engine

pytest_plugins = ["pytester"]
x86_64_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 instruction classes")

LOOP = "void scale(float *x, int n, float k) { for (int i = 0; i < n; i++) x[i] *= k; }\n"
AMX = "void release(void) { __asm__ volatile (\"tilerelease\"); }\n"


def _shared_library(tmp_path: pathlib.Path, name: str, source: str, *flags: str) -> pathlib.Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "src.c").write_text(source)
    subprocess.run(["gcc", "-O3", "-shared", "-fPIC", *flags, "-o", str(folder / f"lib{name}.so"),
                    str(folder / "src.c")], check=True, capture_output=True)
    return folder


@x86_64_only
def test_the_scan_tells_avx2_from_avx512_and_amx(tmp_path):
    if shutil.which("gcc") is None or shutil.which("objdump") is None:
        pytest.fail("gcc and objdump are needed (scripts/test.sh installs them)")
    avx2 = llama_engine.scan_instructions(_shared_library(tmp_path, "avx2", LOOP, "-mavx2", "-mfma"))["libavx2.so"]
    avx512 = llama_engine.scan_instructions(_shared_library(tmp_path, "avx512", LOOP, "-mavx512f",
                                                            "-mprefer-vector-width=512"))["libavx512.so"]
    amx = llama_engine.scan_instructions(_shared_library(tmp_path, "amx", AMX, "-mamx-tile"))["libamx.so"]
    assert avx2["instructions"] > 10 and avx2["avx512_evex"] == 0 and avx2["amx"] == 0
    assert avx512["avx512_evex"] > 0
    assert amx["amx"] == 1


@x86_64_only
def test_the_built_engine_is_portable_and_answered_its_self_check():
    python = llama_engine.engine_python()
    report = json.loads((python.parent.parent / "self-check.json").read_text())
    assert "-DGGML_NATIVE=OFF" in report["cmake_args"] and "-DGGML_AVX512=OFF" in report["cmake_args"]
    assert report["instructions"], "no library was scanned"
    for library, counts in report["instructions"].items():
        assert counts["instructions"] > 0, library
        assert counts["avx512_evex"] == 0 and counts["amx"] == 0, (library, counts)
    assert report["completion"].strip() and report["completion_tokens"] >= 1


@x86_64_only
def test_the_built_engine_answers_on_an_emulated_avx2_only_cpu():
    """The proof that no AVX-512/AMX path runs: qemu-user's Haswell model (AVX2, FMA, no AVX-512)
    raises SIGILL on any AVX-512 instruction. Measured 2026-12-01: the old `-march=native` build died
    there with SIGILL in 2 s; the portable one answered in 11 s (docs/testing.md).
    Two tokens: the first is sampled from the prompt's evaluation (batched matrix kernels), the second from one
    decode step (the one-token kernels every later step repeats); " Paris" is the first. Eight tokens, as before
    2026-12-06, ran six more identical decode steps at about 6 s each under emulation (63 s against 23 s)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.fail("qemu-x86_64 is missing: install Debian's qemu-user (scripts/test.sh does)")
    python = llama_engine.engine_python()
    code = ("import json, sys\n"
            "from llama_cpp import Llama\n"
            "llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, seed=0, verbose=False)\n"
            "print(json.dumps(llm.create_completion(sys.argv[2], max_tokens=2, temperature=0.0)))\n")
    proc = subprocess.run([qemu, "-cpu", "Haswell", str(python), "-c", code, str(llama_engine.model_path()),
                           llama_engine.SELF_CHECK_PROMPT], capture_output=True, text=True, timeout=600, check=False,
                          env=llama_engine.engine_env(python))
    assert proc.returncode == 0, llama_engine._describe_exit(proc.returncode) + proc.stderr[-1500:]
    assert "Paris" in json.loads(proc.stdout.strip().splitlines()[-1])["choices"][0]["text"]


def test_a_failed_engine_build_of_this_run_is_reported_not_rebuilt(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("pip install llama-cpp-python failed: CMake Error at vendor/llama.cpp/...\n")
    code = textwrap.dedent("""\
        import sys
        from support import llama_engine
        try:
            llama_engine.engine_python()
        except llama_engine.EngineUnavailable as exc:
            print(exc)
            sys.exit(3)
        """)
    env = dict(os.environ, GPUFLEET_ENGINE_FAILED_LOG=str(log), GPUFLEET_CACHE=str(tmp_path / "empty-cache"),
               PYTHONPATH=str(pathlib.Path(llama_engine.__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "infrastructure error, not a smoke-test failure" in proc.stdout
    assert str(log) in proc.stdout and "CMake Error" in proc.stdout
    assert not (tmp_path / "empty-cache").exists()  # nothing was built


def test_a_crashed_server_is_described_by_its_signal(tmp_path):
    server = llama_engine.LlamaServer(1, log_path=tmp_path / "server.log")
    (tmp_path / "server.log").write_text("llama_model_load: loaded\n")
    server.proc = subprocess.Popen(["sh", "-c", "kill -SEGV $$"])
    server.proc.wait()
    llama_engine._running.add(server)
    try:
        assert server.crashed()
        report = llama_engine.crashed_servers()
        assert len(report) == 1 and "SIGSEGV" in report[0] and "infrastructure error" in report[0]
        assert "llama_model_load" in report[0]
    finally:
        server.__exit__(None, None, None)
    assert llama_engine.crashed_servers() == []  # a stopped server is not a crash
    assert signal.SIGSEGV.name in llama_engine._describe_exit(-signal.SIGSEGV)
    assert "not portable" in llama_engine._describe_exit(-signal.SIGILL)


def test_a_test_failing_beside_a_crashed_engine_names_the_engine_first(pytester):
    tests_dir = pathlib.Path(llama_engine.__file__).parents[1]
    pytester.makeconftest(textwrap.dedent(f"""\
        import importlib.util
        spec = importlib.util.spec_from_file_location("project_conftest", {str(tests_dir / "conftest.py")!r})
        project_conftest = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(project_conftest)
        pytest_runtest_makereport = project_conftest.pytest_runtest_makereport  # the hook under test
        """))
    pytester.makepyfile(textwrap.dedent(f"""\
        import subprocess, sys
        sys.path.insert(0, {str(tests_dir)!r})
        from support import llama_engine

        def test_smoke_against_a_dead_engine(tmp_path):
            server = llama_engine.LlamaServer(1)
            server.proc = subprocess.Popen(["sh", "-c", "kill -SEGV $$"])
            server.proc.wait()
            llama_engine._running.add(server)
            assert False, "The server does not answer (check host/port)"
        """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "INFRASTRUCTURE ERROR, not a failure of the code under test" in text
    assert "SIGSEGV" in text
    assert text.index("INFRASTRUCTURE ERROR") < text.index("The server does not answer")
