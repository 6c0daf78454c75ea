"""Private redis-server processes for tests (the session server, restarts, replicas)."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass

import redis

from langgraph_durable.embedded import find_server_binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    workdir: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def start_server(
    workdir: str, *options: str, port: int | None = None, password: str | None = None
) -> Server:
    """Start redis-server on a loopback port with ``options`` and wait until it answers.
    Without options it keeps nothing on disk. ``password``: its ``requirepass``."""
    port = port or free_port()
    auth = ["--requirepass", password] if password else []
    proc = subprocess.Popen(
        [find_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir]
        + (list(options) or ["--save", "", "--appendonly", "no"])
        + auth,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, password=password)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                if client.ping():
                    return Server(proc, port, workdir)
            except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.05)
    finally:
        client.close()
