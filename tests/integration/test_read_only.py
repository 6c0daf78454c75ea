"""Reads keep working when Redis refuses writes: out of memory under ``noeviction``, on a
read-only replica, and for an ACL user allowed only reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.io.scripts import server_version
from tests.helpers.graphs import react_graph, react_input
from tests.helpers.redis_keys import flip_last_bit, flipped
from tests.helpers.servers import Server, start_server


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture
def small_server(tmp_path: Path) -> Iterator[Server]:
    server = start_server(
        str(tmp_path), "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"
    )
    yield server
    server.stop()


def out_of_memory(client: redis.Redis, on: bool) -> None:
    """Put the server far over its ``maxmemory`` (or lift the limit): under ``noeviction``
    every write is refused while used memory exceeds it. Far over, not just over: a
    server filled to the edge drifts back under it as buffers are freed."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used // 2 if on else 0)


def test_reads_work_when_redis_is_out_of_memory(small_server: Server) -> None:
    client = redis.Redis.from_url(small_server.url)
    with RedisSaver.from_conn_string(small_server.url) as saver:
        graph = react_graph(3).compile(checkpointer=saver)
        graph.invoke(react_input("before oom"), cfg("t"))
        expected = graph.get_state(cfg("t")).values["messages"]
        history = [c.config for c in saver.list(cfg("t"))]
        out_of_memory(client, True)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            graph.invoke(react_input("more"), cfg("t"))  # writes are refused...
        # ... reads are not: the latest state (one pipelined round trip, no MULTI),
        # history, a fresh saver with nothing remembered, verify.
        assert graph.get_state(cfg("t")).values["messages"] == expected
        assert [c.config for c in saver.list(cfg("t"))] == history
        assert [c.config for c in saver.list(None, limit=3)] == history[:3]
        assert saver.verify("t").ok
    with RedisSaver.from_conn_string(small_server.url) as fresh:
        tup = fresh.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == expected
        # A damaged record is still skipped, though its quarantine cannot be written.
        newest = tup.checkpoint["id"]
        key = fresh.keys.thread("t").cp
        member = fresh.keys.checkpoint_member("", newest)
        record = flipped(client.hget(key, member))
        out_of_memory(client, False)
        client.hset(key, member, record)
        out_of_memory(client, True)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("a-write", b"x")  # still out of memory
        older = fresh.get_tuple(cfg("t"))
        assert older is not None and older.checkpoint["id"] < newest

    async def read_async() -> Any:
        async with AsyncRedisSaver.from_conn_string(small_server.url) as asaver:
            return await asaver.aget_tuple(cfg("t"))

    got = asyncio.run(read_async())
    assert got is not None and got.checkpoint["id"] < newest
    client.close()


def test_reads_work_on_a_read_only_replica(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    replica_dir = tmp_path / "r"
    replica_dir.mkdir()
    primary = start_server(
        str(tmp_path / "p"), "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"
    )
    replica = start_server(
        str(replica_dir),
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        str(primary.port),
    )
    replica_client = redis.Redis.from_url(replica.url)
    try:
        deadline = time.monotonic() + 60  # startup only: the replica's first sync
        while replica_client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.05)
        with RedisSaver.from_conn_string(primary.url) as saver:
            graph = react_graph(2).compile(checkpointer=saver)
            graph.invoke(react_input("replicated"), cfg("t"))
            expected = saver.get_tuple(cfg("t"))
            history = [c.config for c in saver.list(cfg("t"))]
            # WAIT returns as soon as the replica has every write made so far.
            assert redis.Redis.from_url(primary.url).wait(1, 60_000) == 1
        with RedisSaver.from_conn_string(replica.url) as reader:
            got = reader.get_tuple(cfg("t"))
            assert expected is not None and got is not None
            assert got.checkpoint == expected.checkpoint
            assert [c.config for c in reader.list(cfg("t"))] == history
            assert reader.verify("t").ok
        # Damage read on the replica: the fallback at once; the quarantine a read attempts
        # is best effort, refused by the replica (READONLY) and not ridden out.
        primary_client = redis.Redis.from_url(primary.url)
        tk = RedisSaver(primary_client).keys.thread("t")
        flip_last_bit(primary_client, tk.cp, max(primary_client.hkeys(tk.cp)))
        assert primary_client.wait(1, 60_000) == 1
        primary_client.close()
        with RedisSaver.from_conn_string(replica.url, failover_timeout=30) as reader:
            started = time.monotonic()
            fallen_back = reader.get_tuple(cfg("t"))
            assert fallen_back is not None and fallen_back.config != expected.config
            assert time.monotonic() - started < 10, "a best-effort quarantine was ridden out"
    finally:
        replica_client.close()
        replica.stop()
        primary.stop()


def test_reads_work_for_a_read_only_acl_user(redis_url: str, key_prefix: str) -> None:
    admin = redis.Redis.from_url(redis_url)
    if (server_version(admin.info("server")) or (0,)) < (7,):
        pytest.skip("read-only key permissions (%R~) need Redis 7")
    user = f"reader-{key_prefix}"
    admin.execute_command(
        "ACL",
        "SETUSER",
        user,
        "on",
        ">reader-password",
        "resetkeys",
        f"%R~{key_prefix}:*",
        "-@all",
        "+@read",
        "+evalsha_ro",
        "+script|load",
        "+info",
        "+ping",
        "+hello",
    )
    try:
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            react_graph(2).compile(checkpointer=saver).invoke(react_input("acl"), cfg("t"))
            expected = saver.get_tuple(cfg("t"))
            history = [c.config for c in saver.list(cfg("t"))]
        reader_url = redis_url.replace("redis://", f"redis://{user}:reader-password@", 1)
        with RedisSaver.from_conn_string(reader_url, key_prefix=key_prefix) as reader:
            got = reader.get_tuple(cfg("t"))
            assert expected is not None and got is not None
            assert got.checkpoint == expected.checkpoint
            assert [c.config for c in reader.list(cfg("t"))] == history
            with pytest.raises(redis.exceptions.NoPermissionError):
                react_graph(3).compile(checkpointer=reader).invoke(react_input("no"), cfg("t"))
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        admin.close()
