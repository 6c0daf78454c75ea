"""Private redis-server processes for tests (the session server, restarts, replicas)."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from langgraph_durable.embedded import find_server_binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        self.proc.wait(timeout=10)


def start_server(
    workdir: str,
    *options: str,
    port: int | None = None,
    password: str | None = None,
    tls: TlsFiles | None = None,
) -> Server:
    """Start redis-server on a loopback port with ``options`` and wait until it answers.
    Without options it keeps nothing on disk. ``password``: its ``requirepass``. With
    ``tls`` it serves only TLS on that port (clients need not present a certificate).
    Its log is ``redis-<port>.log`` in ``workdir``."""
    port = port or free_port()
    listen = ["--port", str(port)]
    if tls:
        listen = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", tls.cert,
                  "--tls-key-file", tls.key, "--tls-ca-cert-file", tls.ca,
                  "--tls-auth-clients", "no"]  # fmt: skip
    auth = ["--requirepass", password] if password else []
    log = Path(workdir) / f"redis-{port}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [find_server_binary(), *listen, "--bind", "127.0.0.1", "--dir", workdir]
            + (list(options) or ["--save", "", "--appendonly", "no"])
            + auth,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(proc, port, workdir, tls, password)
    client = server.client()
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                if client.ping():
                    return server
            except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    tail = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(
                        f"redis-server did not start on port {port}; its log ends:\n{tail}"
                    ) from None
                time.sleep(0.05)
    finally:
        client.close()
