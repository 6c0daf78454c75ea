"""Every saver under test, opened in one place: key -> (label, family, mode), and one
opener per family (competitors that are missing or unreachable raise Skip, saying why)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.harness import Bench, Skip, server_version
from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.core.keys import escape_thread_id
from tests.helpers.redis_keys import glob_escape

Opened = tuple[BaseCheckpointSaver, Callable[[str], list[str]] | None]


def open_memory(b: Bench, key: str, mode: str) -> Opened:
    return InMemorySaver(), None


def open_sqlite(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-sqlite (and aiosqlite) not installed") from exc
    path = str(b.tmp / f"{key}.sqlite")  # setup() switches the file to WAL mode
    if mode == "sync":
        conn = sqlite3.connect(path, check_same_thread=False)
        b.stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.setup()
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync_level = conn.execute("PRAGMA synchronous").fetchone()[0]
        b.notes.append(
            f"SqliteSaver: a file in a temp dir, journal_mode={journal}, "
            f"synchronous={sync_level} (the saver's defaults)"
        )
        return saver, None
    asaver = b.enter_async(AsyncSqliteSaver.from_conn_string(path))
    b.run(asaver.setup())
    return asaver, None


def open_postgres(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-postgres (psycopg) not installed") from exc
    conninfo = b.postgres_conninfo()
    if mode == "sync":
        saver = b.stack.enter_context(PostgresSaver.from_conn_string(conninfo))
        saver.setup()
        return saver, None
    asaver = b.enter_async(AsyncPostgresSaver.from_conn_string(conninfo))
    b.run(asaver.setup())
    return asaver, None


def open_durable(b: Bench, key: str, mode: str) -> Opened:
    prefix = b.prefix(key)

    def patterns(thread_id: str) -> list[str]:
        return [f"{glob_escape(prefix)}:{{{glob_escape(escape_thread_id(thread_id))}}}:*"]

    if mode == "sync":
        return b.stack.enter_context(
            RedisSaver.from_conn_string(b.redis_url, key_prefix=prefix)
        ), patterns
    saver = b.enter_async(AsyncRedisSaver.from_conn_string(b.redis_url, key_prefix=prefix))
    return saver, patterns


def open_valkey(b: Bench, key: str, mode: str) -> Opened:
    # ValkeySaver has no key prefix: its keys are checkpoint:{T}:..., writes:{T}:...,
    # thread:{T}:...; the run tag in every thread id keeps them apart and findable.
    try:
        import valkey  # noqa: F401  (the [valkey] extra)
        from langgraph_checkpoint_aws.checkpoint.valkey import AsyncValkeySaver, ValkeySaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-aws[valkey] not installed") from exc

    def patterns(thread_id: str) -> list[str]:
        t = glob_escape(thread_id)
        return [f"checkpoint:{{{t}}}:*", f"writes:{{{t}}}:*", f"thread:{{{t}}}:*"]

    if mode == "sync":
        return b.stack.enter_context(ValkeySaver.from_conn_string(b.redis_url)), patterns
    # from_conn_string's pool raises "Too many connections" past its size (10 by default;
    # 100 concurrent runs in (e) overflowed even 128): give it a pool that waits instead,
    # as ours has.
    from valkey.asyncio import BlockingConnectionPool

    pool = BlockingConnectionPool.from_url(b.redis_url, max_connections=100, timeout=20)
    b.astack.push_async_callback(pool.disconnect)  # the saver's client leaves it open
    saver = b.enter_async(AsyncValkeySaver.from_pool(pool))
    return saver, patterns


def open_plainredis(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsync
        from langgraph_checkpoint_plainredis import RedisSaver as PlainSync
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-plainredis not installed") from exc
    prefix = b.prefix(key)

    def patterns(thread_id: str) -> list[str]:
        return [f"{glob_escape(prefix)}:*:{glob_escape(thread_id)}:*"]

    if mode == "sync":
        saver = PlainSync(url=b.redis_url, prefix=prefix)
        b.stack.callback(saver.close)
        return saver, patterns

    async def make() -> Any:  # its asyncio client must be created on the bench loop
        # Its own client's pool raises MaxConnectionsError under the 100 concurrent runs
        # of (e): give it a pool that waits, as ours has (same settings as its default
        # client otherwise: RESP2, binary replies).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            b.redis_url, max_connections=100, timeout=20, protocol=2
        )
        return PlainAsync(client=redis.asyncio.Redis.from_pool(pool), prefix=prefix)

    asaver = b.run(make())
    b.astack.push_async_callback(asaver.aclose)
    return asaver, patterns


def open_redis_official(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.redis import RedisSaver as OfficialSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-redis not installed") from exc
    modules = {
        (m.get(b"name") or m.get("name") or b"").lower()
        for m in (
            dict(zip(entry[::2], entry[1::2])) if isinstance(entry, list) else entry
            for entry in b.redis.execute_command("MODULE", "LIST")
        )
    }
    names = {n.decode() if isinstance(n, bytes) else n for n in modules}
    if not {"search", "rejson"} <= names:
        raise Skip(
            "needs the RedisJSON and RediSearch modules; this Redis "
            f"({server_version(b.redis)}) has {sorted(names) or 'no modules'}"
        )
    prefix = b.prefix(key)
    saver = b.stack.enter_context(
        OfficialSaver.from_conn_string(
            b.redis_url, checkpoint_prefix=f"{prefix}-cp", checkpoint_write_prefix=f"{prefix}-cw"
        )
    )
    saver.setup()  # note: its search indexes are not keys; cleanup leaves them
    return saver, lambda thread_id: [f"*{glob_escape(thread_id)}*"]


OPENERS: dict[str, Callable[[Bench, str, str], Opened]] = {
    "memory": open_memory,
    "sqlite": open_sqlite,
    "postgres": open_postgres,
    "durable": open_durable,
    "valkey": open_valkey,
    "plainredis": open_plainredis,
    "redis-official": open_redis_official,
}
