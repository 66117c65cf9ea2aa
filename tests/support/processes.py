"""Stopping the servers the tests start (engines, routers, stand-ins)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM, wait up to `timeout` seconds, then SIGKILL; nothing if it has already exited."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
