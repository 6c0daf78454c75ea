"""Private redis-server processes for tests (the session server, restarts, replicas)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from langgraph_durable.embedded import find_server_binary

# How long a server may take to answer. A safety net only: the wait ends as soon as it
# answers or its process exits.
START_TIMEOUT = 60.0


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
        self.proc.wait(timeout=30)


def start_server(
    workdir: str,
    *options: str,
    port: int | None = None,
    pick_port: Callable[[], int] = free_port,
) -> Server:
    """Start redis-server on a loopback port with ``options`` and wait until it answers.
    Without options it keeps nothing on disk.

    A port picked here may be taken by another process before redis-server binds it
    (other test sessions run beside this one). So the server counts as started only
    once *this* process answers on the port; if it exited instead (port taken), another
    port is picked, unless ``port`` was given."""
    attempts = 1 if port is not None else 20
    for _ in range(attempts):
        candidate = port or pick_port()
        proc = subprocess.Popen(
            [find_server_binary(), "--port", str(candidate), "--bind", "127.0.0.1"]
            + ["--dir", workdir]
            + (list(options) or ["--save", "", "--appendonly", "no"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _answers(proc, candidate):
            return Server(proc, candidate, workdir)
        proc.kill()
        proc.wait(timeout=30)
    raise RuntimeError(f"redis-server did not start (last port tried: {candidate})")


def _answers(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Wait until ``proc`` itself answers on ``port`` (not another server that holds
    it); False once ``proc`` has exited."""
    client = redis.Redis(port=port)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if int(client.info("server")["process_id"]) == proc.pid:
                    return True
                # another process's server: ours cannot bind the port and will exit
            except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                pass
            time.sleep(0.02)
        return False
    finally:
        client.close()


def wait_until_stopped(proc: subprocess.Popen[Any]) -> None:
    """Return once the child ``proc`` is stopped (SIGSTOP, sent by us or by itself): from
    then on no instruction of it runs until SIGCONT."""
    deadline = time.monotonic() + START_TIMEOUT  # a safety net: the wait ends on the stop
    while True:
        pid, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            assert os.WIFSTOPPED(status), f"process {proc.pid} ended instead ({status})"
            return
        assert time.monotonic() < deadline, f"process {proc.pid} did not stop"
        time.sleep(0.01)
