"""The embedded server: started with AOF, reused by a second process, stale files handled."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.tools.embedded import EmbeddedRedis, _exited


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
        code = f"from langgraph_durable.tools.embedded import EmbeddedRedis; print(EmbeddedRedis({str(tmp_path / 'data')!r}).start())"
        other = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert other.stdout.strip() == url
    finally:
        pid = int(server.pid_file.read_text())
        assert server.stop()
    assert server.running_port() is None
    assert _exited(pid), "stop() returns once the server has exited (its AOF written)"
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


def test_another_server_on_the_remembered_port_is_never_used_nor_shut_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_durable.tools import embedded
    from tests.helpers.servers import start_server

    foreign = start_server(str(tmp_path))  # another project's Redis, say, after a reboot
    try:
        data = tmp_path / "data"
        data.mkdir()
        (data / "redis.port").write_text(str(foreign.port))
        (data / "redis.pid").write_text("999999")
        server = EmbeddedRedis(data)
        assert server.running_port() is None
        assert server.stop() is False
        assert redis.Redis(port=foreign.port).ping(), "stop() shut down another's server"
        # The free port it picks is taken before its server binds it: it picks another.
        picks = iter([foreign.port])
        free = embedded._free_port
        monkeypatch.setattr(embedded, "_free_port", lambda: next(picks, None) or free())
        url = server.start()
        try:
            assert url != f"redis://127.0.0.1:{foreign.port}/0"
            assert server.running_port() == int(url.rsplit(":", 1)[1].split("/")[0])
        finally:
            assert server.stop()
        assert redis.Redis(port=foreign.port).ping()
    finally:
        foreign.stop()


def test_bad_appendfsync_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="appendfsync"):
        EmbeddedRedis(tmp_path, appendfsync="sometimes")
