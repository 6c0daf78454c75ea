"""One round trip of several commands over one pooled connection, without redis-py's
``Pipeline``.

Owns how a ``Batch`` (and a single script call) reaches a single Redis server (not a
cluster, which keeps redis-py's cluster pipeline): the commands packed into one write,
the replies read back in order, MULTI/EXEC for an atomic batch. redis-py's ``Pipeline``
and ``execute_command`` do the same with per-call bookkeeping (command stack,
observability, the pool's checkout check) that costs ~50 µs a round trip on redis-py 8,
a fifth of a put on loopback. Rules it keeps, as redis-py does:
  * An error reply is the command's result (a ``ResponseError``), never raised midway:
    every reply is read before anything is returned, so the connection never desyncs.
  * A connection error resends the whole batch on a fresh connection under the
    client's own ``Retry`` (safe: every batch the saver sends is idempotent); a
    connection that failed is disconnected and goes back to the pool.
  * Replies get the client's response callbacks (``HGETALL`` is a dict, as always).
  * A connection whose round trip ended cleanly (every reply read) is kept for the next
    one (``kept.py``). A kept connection the server closed meanwhile (idle timeout,
    restart) is what the pool's checkout probe would have caught: its first connection
    error is answered by one more try on a fresh socket. A connection that failed, or
    whose server refused a command for its state, is not kept, nor is any other.
Sans-I/O: ``exchange`` is a generator the sync and asyncio drivers below run.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Generator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import ConnectionError, ExecAbortError, ResponseError, TimeoutError

from langgraph_durable.io import kept
from langgraph_durable.io.failover import passing_state
from langgraph_durable.io.resp import packed

# redis-py's own send: a connection class that replaces it (tracing, a proxy) keeps it
_REDIS_PY_SEND = redis.asyncio.connection.AbstractConnection.send_packed_command

if sys.version_info >= (3, 11, 3):  # as redis-py chooses
    from asyncio import timeout as async_timeout
else:  # pragma: no cover - a dependency of redis-py before 3.11.3
    from async_timeout import timeout as async_timeout

SEND, READ = "send", "read"
_NAME = itemgetter(0)  # of a command
_EXCEPTION = repeat(Exception)  # map(isinstance, replies, _EXCEPTION): in C, never exhausted
Exchange = Generator[tuple[str, Any], Any, list[Any]]


def exchange(
    commands: Sequence[tuple[Any, ...]],
    atomic: bool,
    callbacks: Mapping[str, Any],
    after: Sequence[tuple[Any, ...]] = (),
) -> Exchange:
    """Yields ``(SEND, commands)`` once, then ``(READ, n)`` once, and is sent the n
    replies in a list (an error reply as its ``ResponseError``). Returns the results in
    command order, each through the response callback of its command. ``after``:
    commands sent behind the batch (behind its EXEC), their results appended (``WAIT``).
    Every reply is read before anything is raised."""
    if atomic:
        yield SEND, [("MULTI",), *commands, ("EXEC",), *after]
        # OK for MULTI, then QUEUED (or why not) each, then EXEC's, then after's
        read = yield READ, len(commands) + 2 + len(after)
        queued, replies, tail = (
            read[: len(commands) + 1],
            read[len(commands) + 1],
            read[len(commands) + 2 :],
        )
        refused = [r for r in queued if isinstance(r, ResponseError)]
        if isinstance(replies, ResponseError):  # EXECABORT: a command was refused when queued
            raise refused[0] if refused and isinstance(replies, ExecAbortError) else replies
        if not isinstance(replies, list) or len(replies) != len(commands):
            raise ResponseError("wrong number of replies to a transaction")
        replies = [*replies, *tail]
    else:
        yield SEND, [*commands, *after]
        replies = yield READ, len(commands) + len(after)
    sent = [*commands, *after]
    if not any(map(callbacks.__contains__, map(_NAME, sent))):  # usually: told in C
        return replies  # type: ignore[no-any-return]
    results = []
    for reply, command in zip(replies, sent):
        callback = callbacks.get(command[0])
        results.append(
            reply if isinstance(reply, Exception) or callback is None else callback(reply)
        )
    return results


def _ignore(error: Exception) -> None:
    """The default ``lost``: nobody listens."""


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


def _disconnect_idle(pool: Any) -> None:
    """Close the pool's idle connections (they reach the server a refusal came from)."""
    try:
        pool.disconnect(inuse_connections=False)
    except TypeError:  # a pool whose disconnect closes every connection (older redis-py)
        pass


async def _adisconnect_idle(pool: Any) -> None:
    try:
        await pool.disconnect(inuse_connections=False)
    except TypeError:
        pass


def _refused_by_state(results: list[Any]) -> bool:
    """Whether a reply refused its command for the server's state (``failover.py``): a
    demoted primary, a cluster healing. The connection may reach a server that is no
    longer the one to use, and so may every idle one: they are dropped, and the next
    round trip connects afresh (a Sentinel pool asks its sentinels again, a host name is
    resolved again). Kept, a retry would meet the same server until the budget ran out,
    and reads on it would be served from what it held before its demotion."""
    if not any(map(isinstance, results, _EXCEPTION)):  # usually: told in C
        return False
    return any(isinstance(r, Exception) and passing_state(r) for r in results)


def round_trip(
    client: redis.Redis,
    commands: Sequence[tuple[Any, ...]],
    atomic: bool,
    after: Sequence[tuple[Any, ...]] = (),
    lost: Callable[[Exception], None] = _ignore,
) -> list[Any]:
    """Send ``commands`` (then ``after``) to ``client``'s server in one round trip (sync).
    ``lost`` hears of every connection error on the way, also those a retry got past."""
    pool = client.connection_pool
    idle = kept.idle_of(pool)
    conn = kept.reuse(idle)
    was_kept, conn = conn is not None, conn or pool.get_connection()
    if was_kept and kept.moved(conn):
        conn.disconnect()

    def attempt() -> list[Any]:
        return _run(conn, exchange(commands, atomic, client.response_callbacks, after))

    failures = []

    def failed(error: Exception) -> None:
        failures.append(error)
        if not (was_kept and len(failures) == 1):  # a kept socket closed while idle: no failover
            lost(error)
            for other in kept.taken(idle):  # they reach the same lost server
                other.disconnect()
                pool.release(other)
        conn.disconnect()

    try:
        try:
            results = conn.retry.call_with_retry(attempt, failed)
        except ConnectionError:
            if not was_kept:
                raise
            conn.disconnect()  # closed while kept: what the pool's checkout would redo
            results = attempt()
    except BaseException:
        conn.disconnect()
        pool.release(conn)
        raise
    if _refused_by_state(results):
        for stale in [conn, *kept.taken(idle)]:
            stale.disconnect()
            pool.release(stale)
        _disconnect_idle(pool)
    elif not kept.keep(idle, conn):
        pool.release(conn)
    return results  # type: ignore[no-any-return]


def call(client: redis.Redis, *command: Any, lost: Callable[[Exception], None] = _ignore) -> Any:
    """One command in its own round trip (sync): its reply, or its error raised."""
    (reply,) = round_trip(client, [command], False, lost=lost)
    if isinstance(reply, Exception):
        raise reply
    return reply


def _run(conn: Any, steps: Exchange) -> list[Any]:
    reply: Any = None
    while True:
        try:
            op, arg = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = None
        if op == SEND:
            conn.send_packed_command(packed(conn, arg))
            continue
        reply = []
        for _ in range(arg):
            try:
                reply.append(conn.read_response())
            except ResponseError as exc:
                reply.append(exc)


async def around_trip(
    client: redis.asyncio.Redis,
    commands: Sequence[tuple[Any, ...]],
    atomic: bool,
    after: Sequence[tuple[Any, ...]] = (),
    lost: Callable[[Exception], None] = _ignore,
) -> list[Any]:
    """Send ``commands`` (then ``after``) to ``client``'s server in one round trip
    (asyncio); ``lost`` as for ``round_trip``."""
    pool = client.connection_pool
    idle = kept.idle_of(pool)
    conn = kept.reuse(idle)
    was_kept, conn = conn is not None, conn or await pool.get_connection()
    if was_kept and kept.moved(conn):
        await conn.disconnect()

    async def attempt() -> list[Any]:
        return await _arun(conn, exchange(commands, atomic, client.response_callbacks, after))

    failures = []

    async def disconnect(error: Exception) -> None:
        failures.append(error)
        if not (was_kept and len(failures) == 1):  # as in round_trip
            lost(error)
            for other in kept.taken(idle):
                await other.disconnect()
                await pool.release(other)
        await conn.disconnect()

    try:
        try:
            results = await conn.retry.call_with_retry(attempt, disconnect)
        except ConnectionError:
            if not was_kept:
                raise
            await conn.disconnect()
            results = await attempt()
    except BaseException:
        await conn.disconnect()
        await pool.release(conn)
        raise
    if _refused_by_state(results):  # as in round_trip
        for stale in [conn, *kept.taken(idle)]:
            await stale.disconnect()
            await pool.release(stale)
        await _adisconnect_idle(pool)
    elif not kept.keep(idle, conn):
        await pool.release(conn)
    return results  # type: ignore[no-any-return]


async def acall(
    client: redis.asyncio.Redis, *command: Any, lost: Callable[[Exception], None] = _ignore
) -> Any:
    """One command in its own round trip (asyncio): its reply, or its error raised."""
    (reply,) = await around_trip(client, [command], False, lost=lost)
    if isinstance(reply, Exception):
        raise reply
    return reply


async def aexchange(
    conn: Any, commands: Sequence[Any], atomic: bool, callbacks: Mapping[str, Any], after: Any = ()
) -> list[Any]:
    """``exchange`` on ``conn``, a cluster node's connection the caller holds (asyncio)."""
    return await _arun(conn, exchange(commands, atomic, callbacks, after))


async def _arun(conn: Any, steps: Exchange) -> list[Any]:
    reply: Any = None
    while True:
        try:
            op, arg = steps.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply = None
        if op == SEND:
            await _asend(conn, packed(conn, arg))
            continue
        reply = []
        for _ in range(arg):
            try:
                reply.append(await conn.read_response())
            except ResponseError as exc:
                reply.append(exc)


async def _asend(conn: Any, data: list[bytes]) -> None:
    """``conn.send_packed_command(data)`` without its ``asyncio.wait_for``: with a
    ``socket_timeout`` (the saver's clients always have one), redis-py wraps every send
    in a new Task, and the event loop goes round once more before the bytes leave
    (~30 µs of a superstep on loopback). Here the write is queued at once and only the
    wait for the socket to drain is under the deadline; when the socket took every byte
    at once (as a superstep's on loopback) there is no wait, and no timer is armed for
    it (~3.5 µs a send). Anything redis-py would do first (connect, a health check) or
    differently (no deadline, no writer, a connection class with a send of its own) is
    left to it. Its errors are redis-py's."""
    writer = getattr(conn, "_writer", None)
    timeout = getattr(conn, "socket_timeout", None)
    if (
        writer is None
        or not timeout
        or getattr(conn, "health_check_interval", 1)
        or type(conn).send_packed_command is not _REDIS_PY_SEND
    ):
        await conn.send_packed_command(data)
        return
    try:
        writer.writelines(data)
        if writer.transport.get_write_buffer_size():  # bytes wait for the socket
            async with async_timeout(timeout):
                await writer.drain()
        else:  # the socket took every byte, and a transport pauses only on bytes it holds:
            await writer.drain()  # no wait, no timer; raises what the connection met
    except asyncio.TimeoutError:
        await conn.disconnect(nowait=True)
        raise TimeoutError("Timeout writing to socket") from None
    except OSError as exc:  # as redis-py words it
        await conn.disconnect(nowait=True)
        code, message = ("UNKNOWN", exc.args[0]) if len(exc.args) == 1 else exc.args[:2]
        raise ConnectionError(f"Error {code} while writing to socket. {message}.") from exc
    except BaseException:
        await conn.disconnect(nowait=True)
        raise
