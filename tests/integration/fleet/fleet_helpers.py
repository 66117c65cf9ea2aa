"""Real sglang-router and stand-in SGLang workers on loopback, for the fleet tests.

- The router is the real Rust binary from PyPI `sglang-router` (ROUTER_VERSION), installed once in a
  cached venv `$GPUFLEET_CACHE/sglang-router-<version>-py<X.Y>/` (a `.complete` marker marks it done).
- Workers are the stand-in SGLang (tests/support/standin_sglang, a test double: no GPU engine runs
  here). It answers everything the router probes on a worker (`/health`, `/server_info`,
  `/v1/models`; `/model_info` 404 is tolerated by the router) and the OpenAI chat endpoint.

Ports: 32000-32999 (docs/development.md); each test module uses its own sub-range.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from support import pypi  # noqa: E402
from support.ports import PortPool  # noqa: E402
from support.processes import stop_process  # noqa: E402
from support.standin import standin_python  # noqa: E402

ROUTER_VERSION = "0.3.2"
# Offset of a router's Prometheus listener from its port (Router below).
PROMETHEUS_OFFSET = 500


def port_pool(ports: range) -> PortPool:
    """A test module's sub-range (tests/support/ports.py); every port handed out has its Prometheus port
    (PORT + 500) free too, so it can serve a Router as well as a Worker."""
    return PortPool(ports, also=(PROMETHEUS_OFFSET,))


def _venv(name: str, install: list[str]) -> pathlib.Path:
    return pypi.cached_venv(name, install)[0]


def router_python() -> pathlib.Path:
    wheel = pypi.download("sglang-router", ROUTER_VERSION, prefer="wheel")
    return _venv(f"sglang-router-{ROUTER_VERSION}", [str(wheel)])


def http(method: str, url: str, body=None, api_key: str | None = None, timeout: float = 10.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (loopback only)
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class _Proc(contextlib.AbstractContextManager):
    def __init__(self, cmd: list[str], log: pathlib.Path, ready_url: str, env: dict | None = None,
                 timeout: float = 60.0):
        self.cmd, self.log_path, self.ready_url, self.timeout = cmd, log, ready_url, timeout
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.cmd[:4]} exited rc={self.proc.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                if self.ready():
                    return self
            time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError(f"{self.ready_url} not ready after {self.timeout}s: {self.log_path.read_text()[-2000:]}")

    def ready(self) -> bool:
        return http("GET", self.ready_url, timeout=2)[0] == 200

    def stop(self):
        stop_process(self.proc)

    def __exit__(self, *exc):
        self.stop()
        self._log.close()


class Worker(_Proc):
    """A stand-in SGLang server (test double, see module docstring) on 127.0.0.1:PORT."""

    def __init__(self, tmp: pathlib.Path, port: int, served: str = "demo", api_key: str | None = None,
                 mode: str = "ok"):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        cmd = [str(standin_python()), "-m", "sglang.launch_server", "--model-path", "/models/demo",
               "--served-model-name", served, "--host", "127.0.0.1", "--port", str(port)]
        if api_key:
            cmd += ["--api-key", api_key]
        super().__init__(cmd, tmp / f"worker-{port}.log", self.url + "/health",
                         env={"GPUFLEET_STANDIN_MODE": mode,
                              "GPUFLEET_STANDIN_ARGV_FILE": str(tmp / f"worker-{port}.argv.json")})

    def chat_count(self) -> int:
        return self.log_path.read_text().count('"POST /v1/chat/completions')


class Router(_Proc):
    """The real sglang-router on 127.0.0.1:PORT."""

    def __init__(self, tmp: pathlib.Path, port: int, workers: list[str], policy: str = "round_robin",
                 api_key: str | None = None, extra: list[str] | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.startup_workers, self.api_key = list(workers), api_key
        cmd = [str(router_python()), "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
               "--port", str(port), "--policy", policy, "--health-check-interval-secs", "2",
               # Its Prometheus exporter has its own listener (default 29000): one per router.
               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(port + PROMETHEUS_OFFSET),
               "--worker-startup-check-interval", "1", "--log-level", "warn"]
        if workers:
            cmd += ["--worker-urls", *workers]
        if api_key:
            cmd += ["--api-key", api_key]
        cmd += extra or []
        super().__init__(cmd, tmp / f"router-{port}.log", self.url + "/liveness")

    def ready(self) -> bool:
        # /liveness answers before the router lists its --worker-urls: sglang-router 0.3.2 registers them in the
        # background, each once it answers /health. Seen 2026-12-07 beside stress-ng --cpu 2: GET /workers gave []
        # right after /liveness and test_add_remove_idempotent_and_traffic failed (1 of 1,300; stop 50's CI failed
        # one test too). A test starts from a router that lists every startup worker, as its assertions assume.
        if not super().ready():
            return False
        code, body = http("GET", self.url + "/workers", api_key=self.api_key, timeout=2)
        if code != 200 or not isinstance(body, dict):
            return False
        return set(self.startup_workers) <= {worker.get("url") for worker in body.get("workers") or []}


def chat(base_url: str, api_key: str | None = None, model: str = "demo"):
    return http("POST", base_url + "/v1/chat/completions",
                {"model": model, "max_tokens": 8, "temperature": 0,
                 "messages": [{"role": "user", "content": "What is the capital of France?"}]},
                api_key=api_key)
