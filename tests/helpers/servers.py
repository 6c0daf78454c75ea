"""Private redis-server processes for tests (the session server, restarts, replicas)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from langgraph_durable.tools.embedded import find_server_binary

# How long a server may take to answer. A safety net only: the wait ends as soon as it
# answers or its process exits.
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_port() -> int:
    """A port whose cluster-bus twin (port + 10000) looks free too. Only a guess: another
    process may bind either before the node does, and start_server then picks again."""
    rng = random.SystemRandom()  # spread over the range: other sessions run beside us
    while True:
        port = rng.randrange(20000, 30000)
        if all(_is_free(p) for p in (port, port + 10000)):
            return port


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class TlsFiles:
    """A CA certificate and a server certificate (for 127.0.0.1 and localhost) it signed."""

    ca: str
    cert: str
    key: str


def make_tls_files(directory: str) -> TlsFiles:
    """A throwaway CA and a server certificate signed by it, made with the openssl CLI."""
    d = Path(directory)
    files = TlsFiles(str(d / "ca.crt"), str(d / "server.crt"), str(d / "server.key"))
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=langgraph-durable test CA", "-keyout", str(d / "ca.key"), "-out", files.ca],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", files.key, "-out", str(d / "server.csr")],
        ["x509", "-req", "-days", "2", "-in", str(d / "server.csr"), "-CA", files.ca,
         "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-extfile", str(d / "san.ext"),
         "-out", files.cert],
    ):  # fmt: skip
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
    return files


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    workdir: str
    tls: TlsFiles | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A client of this server (trusting its CA when it speaks TLS)."""
        if self.tls:
            return redis.Redis(
                port=self.port, password=self.password, ssl=True, ssl_ca_certs=self.tls.ca
            )
        return redis.Redis(port=self.port, password=self.password)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_server(
    workdir: str,
    *options: str,
    port: int | None = None,
    password: str | None = None,
    tls: TlsFiles | None = None,
    pick_port: Callable[[], int] = free_port,
    binary: str | None = None,
) -> Server:
    """Start redis-server on a loopback port with ``options`` and wait until it answers.
    Without options it keeps nothing on disk. ``password``: its ``requirepass``. With
    ``tls`` it serves only TLS on that port (clients need not present a certificate).
    Its log is ``redis-<port>.log`` in ``workdir``.

    A port picked here may be taken by another process before redis-server binds it
    (other test sessions run beside this one). So the server counts as started only
    once *this* process answers on the port; if it exited instead (port taken), another
    port is picked, unless ``port`` was given. ``binary``: another server than
    ``find_server_binary``'s (the embedded extra's Valkey)."""
    attempts = 1 if port is not None else 20
    for _ in range(attempts):
        candidate = port or pick_port()
        listen = ["--port", str(candidate)]
        if tls:
            listen = ["--port", "0", "--tls-port", str(candidate), "--tls-cert-file", tls.cert,
                      "--tls-key-file", tls.key, "--tls-ca-cert-file", tls.ca,
                      "--tls-auth-clients", "no"]  # fmt: skip
        auth = ["--requirepass", password] if password else []
        log = Path(workdir) / f"redis-{candidate}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [binary or find_server_binary(), *listen, "--bind", "127.0.0.1", "--dir", workdir]
                + (list(options) or ["--save", "", "--appendonly", "no"])
                + auth,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = Server(proc, candidate, workdir, tls, password)
        if _answers(server):
            return server
        proc.kill()
        proc.wait(timeout=30)
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(
        f"redis-server did not start (last port tried: {candidate}); its log ends:\n{tail}"
    )


def _answers(server: Server) -> bool:
    """Wait until the server's own process answers on its port (not another server that
    holds it); False once the process has exited."""
    client = server.client()
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while server.proc.poll() is None and time.monotonic() < deadline:
            try:
                if int(client.info("server")["process_id"]) == server.proc.pid:
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


def start_sentinel(
    workdir: str, master: Server, service: str = "mymaster", down_after_ms: int = 60000
) -> Server:
    """Start ``redis-server --sentinel`` on a loopback port, monitoring ``master`` as
    ``service`` (quorum 1; by default no failover during a test: the master counts as
    down after a minute; ``down_after_ms`` for a test that kills it), and wait until it
    names the master.
    A master with a password gives the sentinel the same one (``requirepass``, and
    ``auth-pass`` to reach the master). A port taken before it binds: another is picked,
    as ``start_server`` does."""
    auth = (
        f"requirepass {master.password}\nsentinel auth-pass {service} {master.password}\n"
        if master.password
        else ""
    )
    for _ in range(20):
        port = free_port()
        conf = Path(workdir) / f"sentinel-{port}.conf"  # a sentinel rewrites its config file
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"sentinel monitor {service} 127.0.0.1 {master.port} 1\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} 10000\n{auth}"
        )
        with open(Path(workdir) / f"sentinel-{port}.log", "ab") as out:
            proc = subprocess.Popen(
                [find_server_binary(), str(conf), "--sentinel"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        sentinel = Server(proc, port, workdir, password=master.password)
        if _names_master(sentinel, service, master.port):
            return sentinel
        proc.kill()
        proc.wait(timeout=30)
    raise RuntimeError(f"redis-server --sentinel did not start; see {workdir}")


def _names_master(sentinel: Server, service: str, master_port: int) -> bool:
    """Wait until the sentinel's own process answers with ``service``'s address; False
    once the process has exited."""
    client = redis.Redis(port=sentinel.port, password=sentinel.password)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while sentinel.proc.poll() is None and time.monotonic() < deadline:
            try:
                if int(client.info("server")["process_id"]) == sentinel.proc.pid:
                    address = client.sentinel_get_master_addr_by_name(service)
                    if address and int(address[1]) == master_port:
                        return True
            except redis.ConnectionError:
                pass
            time.sleep(0.02)
        return False
    finally:
        client.close()
