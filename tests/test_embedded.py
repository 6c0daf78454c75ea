"""The embedded server: started with AOF, reused by a second process, stale files handled."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from langgraph_durable.embedded import EmbeddedRedis
from langgraph_durable.errors import ConfigurationError


def test_start_reuse_stale_files_and_stop(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "data", appendfsync="always")
    url = server.start()
    try:
        client = redis.Redis.from_url(url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.set("lgd-embedded-probe", "1")
        client.close()
        # A second process finds the running server through the port file.
        code = f"from langgraph_durable.embedded import EmbeddedRedis; print(EmbeddedRedis({str(tmp_path / 'data')!r}).start())"
        other = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert other.stdout.strip() == url
    finally:
        pid = int(server.pid_file.read_text())
        assert server.stop()
    assert server.running_port() is None
    wait_until_gone(pid)  # stop() only asks: its AOF is written until the process exits
    # Stale files from a dead server: a new server starts, and the AOF kept the data.
    # The stale port is one held here, bound but not listening: nothing can answer on it
    # (the old port, now free, could be taken by any other process meanwhile).
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        (tmp_path / "data" / "redis.port").write_text(str(dead.getsockname()[1]))
        (tmp_path / "data" / "redis.pid").write_text("999999")
        url2 = server.start()
    try:
        assert redis.Redis.from_url(url2).get("lgd-embedded-probe") == b"1"
    finally:
        server.stop()


def wait_until_gone(pid: int) -> None:
    """Until process ``pid`` (a daemon, not our child) has exited."""
    deadline = time.monotonic() + 120  # a safety net: the wait ends on the exit
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:  # exited, not yet reaped by its parent
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except (ProcessLookupError, FileNotFoundError):
            return
        assert time.monotonic() < deadline, f"the stopped server {pid} did not exit"
        time.sleep(0.02)


def test_bad_appendfsync_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="appendfsync"):
        EmbeddedRedis(tmp_path, appendfsync="sometimes")
