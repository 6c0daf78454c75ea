"""One round trip of several commands over one pooled connection, without redis-py's
``Pipeline``.

Owns how a ``Batch`` reaches a single Redis server (not a cluster, which keeps redis-py's
cluster pipeline): the commands packed into one write, the replies read back in order,
MULTI/EXEC for an atomic batch. redis-py's ``Pipeline`` does the same with per-call
bookkeeping (command stack, observability, field-set preparation) that costs ~25 µs a
call on redis-py 8, a fifth of a put on loopback. Rules it keeps, as ``Pipeline`` does:
  * An error reply is the command's result (a ``ResponseError``), never raised midway:
    every reply is read before anything is returned, so the connection never desyncs.
  * A connection error resends the whole batch on a fresh connection under the
    client's own ``Retry`` (safe: every batch the saver sends is idempotent); a
    connection that failed is disconnected before it goes back to the pool.
  * Replies get the client's response callbacks (``HGETALL`` is a dict, as always).
Sans-I/O: ``exchange`` is a generator the sync and asyncio drivers below run.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import ExecAbortError, ResponseError

SEND, READ = "send", "read"
Exchange = Generator[tuple[str, Any], Any, list[Any]]


def exchange(
    commands: Sequence[tuple[Any, ...]], atomic: bool, callbacks: Mapping[str, Any]
) -> Exchange:
    """Yields ``(SEND, commands)`` once, then ``(READ, name)`` for each reply, and is sent
    the reply (read with the response callback of ``name``; an error reply as its
    ``ResponseError``). Returns the results in command order."""
    if not atomic:
        yield SEND, list(commands)
        results = []
        for command in commands:
            results.append((yield READ, command[0]))
        return results
    yield SEND, [("MULTI",), *commands, ("EXEC",)]
    queued = []
    for _ in range(len(commands) + 1):  # OK for MULTI, then QUEUED (or why not) each
        queued.append((yield READ, "_"))
    replies = yield READ, "_"
    refused = [r for r in queued if isinstance(r, ResponseError)]
    if isinstance(replies, ResponseError):  # EXECABORT: a command was refused when queued
        raise refused[0] if refused and isinstance(replies, ExecAbortError) else replies
    if not isinstance(replies, list) or len(replies) != len(commands):
        raise ResponseError("wrong number of replies to a transaction")
    results = []
    for reply, command in zip(replies, commands):
        callback = callbacks.get(command[0])
        results.append(
            reply if isinstance(reply, Exception) or callback is None else callback(reply)
        )
    return results


def usable(client: Any) -> bool:
    """Whether ``client`` is a plain redis-py client of one server (or of a Sentinel
    master) whose connections this module may drive; anything else keeps ``Pipeline``."""
    # A single-connection client's batches must use its one connection: Pipeline. The
    # flag is `_single_connection_client` on sync clients, without `_` on asyncio ones,
    # and an asyncio one sets `.connection` only once initialized.
    return (
        isinstance(client, (redis.Redis, redis.asyncio.Redis))
        and getattr(client, "connection", None) is None
        and not getattr(client, "single_connection_client", False)
        and not getattr(client, "_single_connection_client", False)
    )


def round_trip(client: redis.Redis, commands: Sequence[tuple[Any, ...]], atomic: bool) -> list[Any]:
    """Send ``commands`` to ``client``'s server in one round trip (sync)."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        return conn.retry.call_with_retry(  # type: ignore[no-any-return]
            lambda: _run(client, conn, exchange(commands, atomic, client.response_callbacks)),
            lambda error: conn.disconnect(),
        )
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def _run(client: redis.Redis, conn: Any, steps: Exchange) -> list[Any]:
    reply: Any = None
    while True:
        try:
            op, arg = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = None
        if op == SEND:
            conn.send_packed_command(conn.pack_commands(arg))
            continue
        try:
            reply = client.parse_response(conn, arg)
        except ResponseError as exc:
            reply = exc


async def around_trip(
    client: redis.asyncio.Redis, commands: Sequence[tuple[Any, ...]], atomic: bool
) -> list[Any]:
    """Send ``commands`` to ``client``'s server in one round trip (asyncio)."""
    pool = client.connection_pool
    conn = await pool.get_connection()

    async def disconnect(error: Exception) -> None:
        await conn.disconnect()

    try:
        return await conn.retry.call_with_retry(  # type: ignore[no-any-return]
            lambda: _arun(client, conn, exchange(commands, atomic, client.response_callbacks)),
            disconnect,
        )
    except BaseException:
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)


async def _arun(client: redis.asyncio.Redis, conn: Any, steps: Exchange) -> list[Any]:
    reply: Any = None
    while True:
        try:
            op, arg = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = None
        if op == SEND:
            await conn.send_packed_command(conn.pack_commands(arg))
            continue
        try:
            reply = await client.parse_response(conn, arg)
        except ResponseError as exc:
            reply = exc
