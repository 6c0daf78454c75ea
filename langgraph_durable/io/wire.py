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
    one (``_Idle``: at most ``IDLE_MAX`` per pool, and no more than a sixteenth of it)
    instead of going back through the pool's checkout, whose "has it unread data" probe
    is a failed non-blocking read each time; only where that skips nothing the pool
    does (``_idle``). A kept connection the server closed meanwhile (idle timeout,
    restart) is what that probe would have caught: its first connection error is
    answered by one more try on a fresh socket.
Sans-I/O: ``exchange`` is a generator the sync and asyncio drivers below run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import ConnectionError, ExecAbortError, ResponseError

try:  # redis-py packs with hiredis when it is installed; so do we, without its wrapper
    from hiredis import pack_command as _hiredis_pack
    from redis.connection import HiredisRespSerializer
except ImportError:  # pragma: no cover - hiredis is optional
    _hiredis_pack = None
    HiredisRespSerializer = None  # type: ignore[assignment,misc]

SEND, READ = "send", "read"
Exchange = Generator[tuple[str, Any], Any, list[Any]]
IDLE_MAX = 4  # connections kept per pool between round trips, at most 1/16 of the pool


def exchange(
    commands: Sequence[tuple[Any, ...]],
    atomic: bool,
    callbacks: Mapping[str, Any],
    after: Sequence[tuple[Any, ...]] = (),
) -> Exchange:
    """Yields ``(SEND, commands)`` once, then ``(READ, None)`` for each reply, and is sent
    the reply (an error reply as its ``ResponseError``). Returns the results in command
    order, each through the response callback of its command. ``after``: commands sent
    behind the batch (behind its EXEC), their results appended (``WAIT``)."""
    if atomic:
        yield SEND, [("MULTI",), *commands, ("EXEC",), *after]
        queued = []
        for _ in range(len(commands) + 1):  # OK for MULTI, then QUEUED (or why not) each
            queued.append((yield READ, None))
        replies = yield READ, None
        tail = []  # every reply is read before anything is raised
        for _ in after:
            tail.append((yield READ, None))
        refused = [r for r in queued if isinstance(r, ResponseError)]
        if isinstance(replies, ResponseError):  # EXECABORT: a command was refused when queued
            raise refused[0] if refused and isinstance(replies, ExecAbortError) else replies
        if not isinstance(replies, list) or len(replies) != len(commands):
            raise ResponseError("wrong number of replies to a transaction")
        replies = [*replies, *tail]
    else:
        yield SEND, [*commands, *after]
        replies = []
        for _ in range(len(commands) + len(after)):
            replies.append((yield READ, None))
    results = []
    for reply, command in zip(replies, [*commands, *after]):
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


class _Idle:
    """The connections kept checked out of one pool between round trips (a stack: the
    warmest first), held by the pool itself (``_ATTRIBUTE``), so they go when it goes.
    List ``append``/``pop`` are atomic, so threads and tasks share it."""

    def __init__(self, limit: int) -> None:
        self.pid = os.getpid()
        self.limit = limit
        self.connections: list[Any] = []


_ATTRIBUTE = "_langgraph_durable_idle"
_PLAIN_POOLS = (redis.ConnectionPool, redis.asyncio.ConnectionPool)
_idle_lock = threading.Lock()


def _new_lock_in_child() -> None:  # a fork while another thread held the lock
    global _idle_lock
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def _idle(pool: Any) -> _Idle | None:
    """The kept connections of ``pool``, or None where it must not keep any: only a
    plain pool (a blocking one makes its callers wait for what is kept; a Sentinel one
    asks Sentinel for the master at checkout), big enough (redis-py 8's default is 100),
    without client-side caching or a credential provider (whose re-authentication
    happens when a connection goes back to the pool)."""
    idle = pool.__dict__.get(_ATTRIBUTE, False)
    if idle is False:
        limit = min(IDLE_MAX, (getattr(pool, "max_connections", 0) or 0) // 16)
        kwargs = getattr(pool, "connection_kwargs", {})
        keep = (
            limit > 0
            and type(pool) in _PLAIN_POOLS
            and getattr(pool, "cache", None) is None
            and kwargs.get("credential_provider") is None
        )
        with _idle_lock:
            idle = pool.__dict__.setdefault(_ATTRIBUTE, _Idle(limit) if keep else None)
    if idle is not None and idle.pid != os.getpid():  # a forked child: the pool resets
        idle.pid, idle.connections = os.getpid(), []
    return idle  # type: ignore[no-any-return]


def _reuse(idle: _Idle | None) -> Any:
    """A kept connection, or None."""
    if idle is None:
        return None
    try:
        return idle.connections.pop()
    except IndexError:  # none left
        return None


def _moved(conn: Any) -> bool:
    """Whether the server asked ``conn`` to reconnect (redis-py 8's maintenance
    notifications): what the pool's release() would have disconnected."""
    return bool(getattr(conn, "should_reconnect", lambda: False)())


def _keep(idle: _Idle | None, conn: Any) -> bool:
    """Keep ``conn`` (its round trip ended cleanly) if there is room."""
    if idle is None:
        return False
    with _idle_lock:
        if len(idle.connections) >= idle.limit:
            return False
        idle.connections.append(conn)
        return True


def _kept(client: Any) -> tuple[Any, list[Any]]:
    """``client``'s pool and the connections it kept, taken one by one (each pop is
    atomic: none is handed to a round trip and back to the pool at once)."""
    pool = getattr(client, "connection_pool", None)
    idle = getattr(pool, "__dict__", {}).get(_ATTRIBUTE)
    if not isinstance(idle, _Idle) or idle.pid != os.getpid():
        return pool, []
    kept = []
    while (conn := _reuse(idle)) is not None:
        kept.append(conn)
    return pool, kept


def give_back(client: redis.Redis) -> None:
    """Return the connections kept for ``client``'s pool to it (a saver closing)."""
    pool, kept = _kept(client)
    for conn in kept:
        pool.release(conn)


async def agive_back(client: redis.asyncio.Redis) -> None:
    """``give_back`` for an asyncio client."""
    pool, kept = _kept(client)
    for conn in kept:
        await pool.release(conn)


def _packed(conn: Any, commands: Sequence[tuple[Any, ...]]) -> list[bytes]:
    if HiredisRespSerializer is not None and isinstance(
        getattr(conn, "_command_packer", None), HiredisRespSerializer
    ):
        try:  # what redis-py's serializer does, minus its per-argument pass
            return [b"".join([_hiredis_pack(c) for c in commands])]
        except TypeError:  # an argument hiredis does not take: redis-py converts it
            pass
    encoder = getattr(conn, "encoder", None)
    if getattr(encoder, "encoding", None) == "utf-8" and encoder.encoding_errors == "strict":
        try:
            return [_resp(commands)]
        except TypeError:  # an argument only redis-py converts (or refuses, typed)
            pass
    return conn.pack_commands(commands)  # type: ignore[no-any-return]


def _resp(commands: Sequence[tuple[Any, ...]]) -> bytes:
    """``commands`` in RESP, as redis-py's pure-Python serializer packs them for a UTF-8
    client (bytes as they are, str as UTF-8, int in decimal) in one join: its serializer
    joins its buffer again for every argument (packing a put's script call measured 89 µs
    there, 39 µs here). Anything else (a float, a bool, a subclass, a memoryview) raises
    TypeError for redis-py to handle."""
    out = []
    append = out.append
    for args in commands:
        first = args[0]  # "CONFIG GET" goes as two, as redis-py sends it
        if type(first) is str:
            args = (*first.encode().split(), *args[1:])
        elif type(first) is not bytes:
            raise TypeError(type(first))
        elif b" " in first:
            args = (*first.split(), *args[1:])
        append(b"*%d\r\n" % len(args))
        for arg in args:
            kind = type(arg)
            if kind is str:
                arg = arg.encode()
            elif kind is int:
                arg = b"%d" % arg
            elif kind is not bytes:
                raise TypeError(kind)
            append(b"$%d\r\n" % len(arg))
            append(arg)
            append(b"\r\n")
    return b"".join(out)


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
    idle = _idle(pool)
    conn = _reuse(idle)
    kept, conn = conn is not None, conn or pool.get_connection()
    if kept and _moved(conn):
        conn.disconnect()

    def attempt() -> list[Any]:
        return _run(conn, exchange(commands, atomic, client.response_callbacks, after))

    failures = []

    def failed(error: Exception) -> None:
        failures.append(error)
        if not (kept and len(failures) == 1):  # a kept socket closed while idle: no failover
            lost(error)
        conn.disconnect()

    try:
        try:
            results = conn.retry.call_with_retry(attempt, failed)
        except ConnectionError:
            if not kept:
                raise
            conn.disconnect()  # closed while kept: what the pool's checkout would redo
            results = attempt()
    except BaseException:
        conn.disconnect()
        pool.release(conn)
        raise
    if not _keep(idle, conn):
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
            conn.send_packed_command(_packed(conn, arg))
            continue
        try:
            reply = conn.read_response()
        except ResponseError as exc:
            reply = exc


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
    idle = _idle(pool)
    conn = _reuse(idle)
    kept, conn = conn is not None, conn or await pool.get_connection()
    if kept and _moved(conn):
        await conn.disconnect()

    async def attempt() -> list[Any]:
        return await _arun(conn, exchange(commands, atomic, client.response_callbacks, after))

    failures = []

    async def disconnect(error: Exception) -> None:
        failures.append(error)
        if not (kept and len(failures) == 1):  # as in round_trip
            lost(error)
        await conn.disconnect()

    try:
        try:
            results = await conn.retry.call_with_retry(attempt, disconnect)
        except ConnectionError:
            if not kept:
                raise
            await conn.disconnect()
            results = await attempt()
    except BaseException:
        await conn.disconnect()
        await pool.release(conn)
        raise
    if not _keep(idle, conn):
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
            await conn.send_packed_command(_packed(conn, arg))
            continue
        try:
            reply = await conn.read_response()
        except ResponseError as exc:
            reply = exc
