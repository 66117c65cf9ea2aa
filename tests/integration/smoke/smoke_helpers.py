"""Helpers for the smoke-test integration tests: loopback ports, the SGLang stand-in, running the module.

Ports come from the smoke-test range 30200-30299 (docs/development.md), picked free at run time.
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
STANDIN = ROOT / "tests" / "support" / "standin_sglang"
sys.path.insert(0, str(ROOT / "tests"))

from support import ansible_harness  # noqa: E402
from support.ports import PortPool  # noqa: E402
from support.processes import stop_process  # noqa: E402

QUIET = {"ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
# The smoke-test range; a port is handed out to one process at a time (tests/support/ports.py).
PORTS = PortPool(range(30200, 30300))


def free_port() -> int:
    """A loopback port in 30200-30299 that nothing listens on (and this run has not handed out)."""
    return PORTS.take()


def release_port(port: int) -> None:
    """Hand PORT back once its server has stopped (the range has only 100 ports for the whole run)."""
    PORTS.release(port)


def wait_http(url: str, timeout: float = 30.0, want: int = 200) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback)
                if resp.status == want:
                    return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer {want} within {timeout}s")


class Standin:
    """The SGLang stand-in (tests/support/standin_sglang, a test double) as a plain process."""

    def __init__(self, tmp: pathlib.Path, mode: str = "ok", *, served_model_name: str | None = "kimi-k2.5",
                 model_path: str = "/shared/kimi-k2.5-int4", tool_call_parser: str | None = None,
                 reasoning_parser: str | None = None, api_key: str | None = None, wait: bool = True):
        self.port = free_port()
        self.tmp = tmp
        self.log_path = tmp / f"standin-{self.port}.log"
        argv = ["--model-path", model_path, "--host", "127.0.0.1", "--port", str(self.port),
                "--tp-size", "8", "--mem-fraction-static", "0.88"]
        if served_model_name:
            argv += ["--served-model-name", served_model_name]
        if tool_call_parser:
            argv += ["--tool-call-parser", tool_call_parser]
        if reasoning_parser:
            argv += ["--reasoning-parser", reasoning_parser]
        if api_key:
            argv += ["--api-key", api_key]
        env = dict(os.environ, GPUFLEET_STANDIN_MODE=mode, PYTHONPATH=str(STANDIN),
                   GPUFLEET_STANDIN_ARGV_FILE=str(tmp / f"argv-{self.port}.json"))
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *argv], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        if wait:
            wait_http(self.base_url + "/health", 30)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)
        self._log.close()
        release_port(self.port)


def run_module(args: dict, tmp_path: pathlib.Path, *, check: bool = False, expect_error: bool = False):
    """Run gpufleet.llm_server.openai_smoke_test on localhost (tests/support/ansible_harness.py run_module); return
    its result, with the run's stdout as _stdout.

    The task fails only when the module could not run the checks (`passed` missing); failed checks
    are returned. expect_error=True: assert that ansible-playbook failed and return its output."""
    run = ansible_harness.run_module(tmp_path, "gpufleet.llm_server.openai_smoke_test", args, check=check,
                                     task={"register": "smoke", "failed_when": "smoke.passed is not defined"},
                                     env=QUIET)
    if expect_error:
        assert run.rc != 0, run.stdout[-4000:]
        return run.stdout + run.stderr
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return dict(run.result, _stdout=run.stdout)


def run_role(tmp_path: pathlib.Path, port: int, **extra) -> ansible_harness.PlaybookResult:
    """The openai_smoke_test role through ansible-playbook on localhost, against 127.0.0.1:PORT (profile 'demo').

    Unit watching, rollback and marking known good are off unless EXTRA turns them on (they need the
    sglang_service role and systemd); the report goes to TMP_PATH/reports. The default callback with the
    checkout's ansible.cfg (what a user sees); result.flat: stdout unwrapped."""
    inventory_vars = {
        "llm_server_model": "demo",
        "llm_server_models": {"demo": {"host": "127.0.0.1", "port": port, "served_model_name": "demo",
                                       "tool_call_parser": "kimi_k2", "reasoning_parser": "kimi_k2"}},
        "openai_smoke_test_watch_unit": False,
        "openai_smoke_test_mark_known_good": False,
        "openai_smoke_test_rollback": False,
        "openai_smoke_test_progress_interval": 2,
        "openai_smoke_test_ready_timeout": 60,
        "openai_smoke_test_request_timeout": 20,
        "openai_smoke_test_results_dir": str(tmp_path / "reports"),
        "ansible_python_interpreter": sys.executable,
    }
    inventory_vars.update(extra)
    (tmp_path / "vars.json").write_text(json.dumps(inventory_vars))
    result = ansible_harness.run_playbook(
        tmp_path, [{"hosts": "localhost", "gather_facts": False,
                    "roles": [{"role": "gpufleet.llm_server.openai_smoke_test"}]}],
        args=("-e", "@" + str(tmp_path / "vars.json")), callback="ansible.builtin.default",
        env=dict(QUIET, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")), timeout=300)
    result.flat = " ".join(result.stdout.split())  # the YAML callback wraps long lines
    return result
