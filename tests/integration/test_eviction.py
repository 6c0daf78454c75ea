"""A Redis that really evicts: a private server with a small ``maxmemory`` and an
``allkeys-*`` policy drops some of a thread's keys under memory pressure. Whatever it
drops, the saver warned at setup, never returns damaged or mixed-up state, and a write
that would build on what is gone raises a typed error instead of succeeding."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph_durable import CheckpointLostError, RedisSaver
from langgraph_durable.core.keys import THREAD_KEY_KINDS
from tests.helpers.graphs import react_graph, react_input
from tests.helpers.servers import Server, start_server


def cfg(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


@pytest.fixture(params=["allkeys-lru", "allkeys-random"])
def evicting_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    server = start_server(
        str(tmp_path),
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        "4mb",
        "--maxmemory-policy",
        request.param,
        "--maxmemory-samples",
        "10",
    )
    yield server
    server.stop()


def evict_some_of(client: redis.Redis, keys: list[str]) -> list[str]:
    """Write filler until Redis has evicted at least one of ``keys`` (and stop there)."""
    for i in range(100_000):
        client.set(f"filler:{i}", b"f" * 20_000)
        if i % 10 == 9:
            gone = [k for k in keys if not client.exists(k)]
            if gone:
                return gone
    pytest.fail("Redis never evicted any of the thread's keys")


def test_eviction_is_warned_about_and_never_read_as_good_data(
    evicting_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis.Redis.from_url(evicting_server.url)
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        saver_cm = RedisSaver.from_conn_string(evicting_server.url)
        saver = saver_cm.__enter__()
    try:
        assert "maxmemory-policy" in caplog.text and "noeviction" in caplog.text
        graph = react_graph(4, payload=2_000).compile(checkpointer=saver)
        graph.invoke(react_input("evict me"), cfg("t"))
        pristine = {c.checkpoint["id"]: c.checkpoint for c in saver.list(cfg("t"))}
        tk = saver.keys.thread("t")
        keys = [getattr(tk, kind) for kind in THREAD_KEY_KINDS if client.exists(getattr(tk, kind))]
        gone = evict_some_of(client, keys)
        assert gone

        # Reads: a checkpoint is returned only whole and exactly as written, or not at all.
        fresh = RedisSaver(client)
        fresh.setup()
        for reader in (saver, fresh):
            tup = reader.get_tuple(cfg("t"))
            if tup is not None:
                assert tup.checkpoint == pristine[tup.checkpoint["id"]]
            for listed in reader.list(cfg("t")):
                assert listed.checkpoint == pristine[listed.checkpoint["id"]]

        # Writes: going on from the newest checkpoint either works from whole state, or
        # says the state it builds on is gone; it never writes a checkpoint no read can use.
        try:
            graph.invoke(react_input("more"), cfg("t"))
        except CheckpointLostError:
            pass
        else:
            after = saver.get_tuple(cfg("t"))
            assert after is not None
            contents = [m.content for m in after.checkpoint["channel_values"]["messages"]]
            assert contents[-1] == "final answer" and "more" in contents
    finally:
        saver_cm.__exit__(None, None, None)
        client.close()
