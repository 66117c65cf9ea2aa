"""Loopback ports for the tests, from the ranges of docs/development.md, safe when tests run in parallel.

A bind check alone is racy between processes: two pytest-xdist workers (or two checkouts' test runs on one
machine) can both find a port free before either server has bound it. So a port is handed out only under
an exclusive lock on `<tmp>/gpufleet-test-ports/<port>.lock` (flock, non-blocking), which this process holds
until the test `release`s the port, or until it exits: the kernel drops the lock of a process that died, so
no stale lock is left behind. A port something else already listens on (a server of an older checkout) is
skipped by the bind check as before.

A Molecule scenario's ports are held in the same folder by scripts/molecule_scenarios.py for as long as the
scenario runs (its stand-in servers bind them inside a container that shares this loopback): `make test` runs
the scenarios beside the unit stage (issue 36), so a test must not take a port a scenario's server is about to
bind. GPUFLEET_PORT_LOCKS names the folder (default `<tmp>/gpufleet-test-ports`); the runner's own tests point it
at their tmp_path, away from a real run's scenarios.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import socket
import tempfile

LOCKS = pathlib.Path(os.environ.get("GPUFLEET_PORT_LOCKS") or pathlib.Path(tempfile.gettempdir()) / "gpufleet-test-ports")


def bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortPool:
    """Ports of RANGE: `take()` one that nothing listens on and no other process holds; `release(port)` it after use.

    `also`: offsets of further ports a server needs beside the one it is given (sglang-router's Prometheus
    listener at PORT + 500); they must be free too (they lie outside RANGE, in a range no other pool uses).
    """

    def __init__(self, ports: range, *, also: tuple[int, ...] = ()):
        self.ports = ports
        self.also = also
        self._held: dict[int, object] = {}

    def take(self) -> int:
        LOCKS.mkdir(parents=True, exist_ok=True)
        for port in self.ports:
            if port in self._held:
                continue
            lock = open(LOCKS / f"{port}.lock", "w")  # noqa: SIM115 (held open while the port is handed out)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another process (a pytest-xdist worker, another checkout's run) has it
                lock.close()
                continue
            if all(bindable(port + offset) for offset in (0, *self.also)):
                self._held[port] = lock
                return port
            lock.close()
        raise RuntimeError(f"no free port in {self.ports.start}-{self.ports.stop - 1}: {len(self._held)} handed out "
                           f"by this process and not released, the others held or listened on ({LOCKS}, ss -ltnp)")

    def release(self, port: int) -> None:
        """Hand PORT back once its server has stopped."""
        lock = self._held.pop(port, None)
        if lock is not None:
            lock.close()
