"""Redis hazards are detected, never silently wrong: an eviction policy that can drop the
saver's keys, partial loss of a thread's keys (ledger halves, a checkpoint index without
records, a parent checkpoint gone), Lua's ``unpack`` limit, refused writes that leave
values behind, and keys created without the thread's TTL.

Every test runs on private redis-servers of its own (FLUSHDB and CONFIG SET included)."""

from __future__ import annotations

import logging
import operator
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import redis
import redis.cluster
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, RedisSaver, hazards
from tests.servers import Server, start_server

NO_DISK = ("--save", "", "--appendonly", "no")


@pytest.fixture
def private(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start private redis-servers with extra options; all stopped after the test."""
    started: list[Server] = []

    def start(*options: str) -> Server:
        workdir = tmp_path / f"redis-{len(started)}"
        workdir.mkdir()
        server = start_server(str(workdir), *NO_DISK, *options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the once-per-process warnings afresh (ports are reused)."""
    monkeypatch.setattr(hazards, "_reported", set())


def eviction_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "langgraph_durable" and r.levelno == level and "maxmemory-policy" in r.getMessage()
    ]


# -- 1. an eviction policy that can drop the saver's keys ----------------------------------
@pytest.mark.parametrize(
    ("policy", "ttl", "warned"),
    [
        ("allkeys-lru", None, True),
        ("allkeys-random", 60, True),
        ("volatile-lru", 60, True),
        ("volatile-lru", None, False),  # no key of the saver has a TTL: none can go
        ("noeviction", 60, False),
    ],
)
def test_setup_warns_once_when_redis_may_evict_the_savers_keys(
    private: Callable[..., Server],
    fresh_warnings: None,
    caplog: pytest.LogCaptureFixture,
    policy: str,
    ttl: int | None,
    warned: bool,
) -> None:
    server = private("--maxmemory-policy", policy, "--maxmemory", "100mb")
    caplog.set_level(logging.DEBUG, logger="langgraph_durable")
    with RedisSaver.from_conn_string(server.url, ttl=ttl) as saver:
        saver.setup()  # again: still one warning
        with RedisSaver.from_conn_string(server.url, ttl=ttl):  # a second saver, same server
            pass
    warnings = eviction_records(caplog, logging.WARNING)
    if not warned:
        assert warnings == []
        return
    (message,) = warnings
    assert repr(policy) in message and f"127.0.0.1:{server.port}" in message
    assert "set maxmemory-policy noeviction" in message


async def test_asetup_warns_too(
    private: Callable[..., Server], fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    server = private("--maxmemory-policy", "allkeys-lfu")
    async with AsyncRedisSaver.from_conn_string(server.url) as saver:
        await saver.asetup()
    (message,) = eviction_records(caplog, logging.WARNING)
    assert "'allkeys-lfu'" in message


def test_without_config_permission_setup_says_at_debug_level_it_could_not_check(
    private: Callable[..., Server], fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    server = private("--maxmemory-policy", "allkeys-lru")
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", "-config")
    admin.close()
    caplog.set_level(logging.DEBUG, logger="langgraph_durable")
    url = f"redis://app:secret@127.0.0.1:{server.port}/0"
    with RedisSaver.from_conn_string(url) as saver:  # no failure
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )
    assert eviction_records(caplog, logging.WARNING) == []
    (message,) = eviction_records(caplog, logging.DEBUG)
    assert "could not check" in message and "no permissions" in message


def test_on_a_cluster_every_primary_is_checked(
    cluster_url: str, fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis.cluster.RedisCluster.from_url(cluster_url)
    url_port = int(cluster_url.rsplit(":", 1)[1])
    node = next(n for n in client.get_primaries() if n.port != url_port)  # not the URL's
    client.config_set("maxmemory-policy", "allkeys-lru", target_nodes=node)
    try:
        with RedisSaver.from_conn_string(cluster_url, cluster=True):
            pass
    finally:
        client.config_set("maxmemory-policy", "noeviction", target_nodes=node)
        client.close()
    (message,) = eviction_records(caplog, logging.WARNING)
    assert node.name in message and "'allkeys-lru'" in message


def test_the_decision_is_the_policy_and_the_ttl() -> None:
    assert hazards.eviction_hazard("allkeys-lru", None)
    assert hazards.eviction_hazard("volatile-ttl", 5)
    assert hazards.eviction_hazard("volatile-ttl", None) is None
    assert hazards.eviction_hazard("noeviction", 5) is None
    assert hazards.policy_of({b"maxmemory-policy": b"allkeys-lru"}) == "allkeys-lru"
    assert hazards.policy_of({}) is None


def _empty_checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


# -- 4. no limit of Lua's unpack(): a crashed 20,000-task fan-out reads back ---------------
FAN_OUT = 20_000


class FanState(TypedDict):
    done: Annotated[list[int], operator.add]


def fan_out_graph(width: int) -> StateGraph:
    """START sends ``width`` tasks; the last one stops the step with an interrupt after
    the others saved their writes, as a crash would leave it."""

    def work(item: int) -> dict[str, Any]:
        if item == width - 1:
            interrupt("the fan-out stopped here")
        return {"done": [item]}

    builder = StateGraph(FanState)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, lambda state: [Send("work", i) for i in range(width)])
    builder.add_edge("work", END)
    return builder


def test_a_checkpoint_with_20000_pending_writes_reads_back_whole_and_resumes(
    private: Callable[..., Server],
) -> None:
    server = private()
    config = {"configurable": {"thread_id": "fan"}}
    with RedisSaver.from_conn_string(server.url) as saver:
        graph = fan_out_graph(FAN_OUT).compile(checkpointer=saver)
        out = graph.invoke({"done": []}, config)  # ~25 s on a busy 2-core machine
        assert out["__interrupt__"]
        stored = saver.get_tuple(config)
        assert stored is not None
        done = {v[0] for _, channel, v in stored.pending_writes if channel == "done"}
        assert len(done) == FAN_OUT - 1
        assert len({task for task, _, _ in stored.pending_writes}) == FAN_OUT
        out = graph.invoke(Command(resume="go on"), config)
        assert sorted(out["done"]) == list(range(FAN_OUT))
