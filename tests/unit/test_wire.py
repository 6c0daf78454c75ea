"""One round trip without redis-py's Pipeline (wire.py), driven by hand: what is sent,
how replies come back in order, error replies as results, MULTI/EXEC and its abort."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio
from hypothesis import given
from hypothesis import strategies as st
from redis.exceptions import ExecAbortError, ResponseError

from langgraph_durable.io import resp
from langgraph_durable.io.resp import HiredisRespSerializer
from langgraph_durable.io.wire import READ, SEND, exchange, usable

CALLBACKS = {"HGETALL": lambda reply: dict(zip(reply[::2], reply[1::2]))}


def drive(steps: Any, replies: list[Any]) -> tuple[list[Any], list[str], Any]:
    """Run an exchange: what it sent, its reads, its result."""
    sent: list[Any] = []
    names: list[str] = []
    reply: Any = None
    while True:
        try:
            op, arg = steps.send(reply)
        except StopIteration as stop:
            return sent, names, stop.value
        if op == SEND:
            sent.append(arg)
            reply = None
        else:
            assert op == READ
            names.append(arg)
            reply = [replies.pop(0) for _ in range(arg)]


# redis-py packs with hiredis (when installed) on sync connections, in Python on asyncio
# ones: wire's bytes must be each one's own
CONNECTIONS = [
    pytest.param(redis.Connection, id="sync"),
    pytest.param(redis.asyncio.Connection, id="asyncio"),
]


def test_a_batch_is_one_write_and_its_replies_in_order() -> None:
    commands = [("HSETNX", "k", "f", b"v"), ("HGETALL", "h"), ("EVALSHA", "x", 0)]
    error = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    sent, names, result = drive(exchange(commands, False, CALLBACKS), [1, [b"a", b"1"], error])
    assert sent == [commands]  # one write
    assert names == [3]  # one read of a reply per command
    assert result == [1, {b"a": b"1"}, error]  # callbacks applied; an error is its result


def test_a_transaction_wraps_the_batch_and_applies_the_callbacks() -> None:
    commands = [("HGETALL", "h"), ("EVALSHA", "x", 0)]
    error = ResponseError("LGD_FENCED 3 4")
    replies = [b"OK", b"QUEUED", b"QUEUED", [[b"a", b"1"], error]]
    sent, names, result = drive(exchange(commands, True, CALLBACKS), replies)
    assert sent == [[("MULTI",), *commands, ("EXEC",)]]
    assert names == [4]  # MULTI's, two QUEUED, EXEC's
    assert result == [{b"a": b"1"}, error]


def test_a_transaction_refused_when_queued_raises_why() -> None:
    commands = [("HSETNX", "k", "f", b"v"), ("EVALSHA", "x", 0)]
    oom = ResponseError("OOM command not allowed when used memory > 'maxmemory'")
    abort = ExecAbortError("EXECABORT Transaction discarded because of previous errors.")
    with pytest.raises(ResponseError, match="OOM"):
        drive(exchange(commands, True, CALLBACKS), [b"OK", oom, b"QUEUED", abort])
    with pytest.raises(ResponseError, match="wrong number of replies"):
        drive(exchange(commands, True, CALLBACKS), [b"OK", b"QUEUED", b"QUEUED", [1]])


def test_single_connection_clients_keep_their_connection() -> None:
    assert usable(redis.Redis()) and usable(redis.asyncio.Redis())
    assert not usable(redis.Redis(single_connection_client=True))
    assert not usable(redis.asyncio.Redis(single_connection_client=True))


@pytest.mark.parametrize(
    "commands",
    [
        [("HSET", "p:{t}:el", b"\x00\xff" * 8, b"x" * 70_000)],
        [("EVALSHA", "ab" * 20, 3, "k1", "k2", "k3", -7, 0, "", "ünïcode ✓", b"")],
        [("CONFIG GET", "maxmemory"), (b"CLIENT SETNAME", "lgd"), ("PING",)],
        [("GET\t", "k"), ("CONFIG\tGET", "x"), (" SET ", "k", "v")],
        [("MULTI",), ("HSETNX", "k", "f", b"v"), ("EXEC",)],
    ],
)
@pytest.mark.parametrize("connection", CONNECTIONS)
def test_our_packing_sends_the_bytes_redis_py_sends(
    commands: list[tuple[Any, ...]], connection: Any
) -> None:
    """wire packs a batch in one join; the bytes on the wire are redis-py's own."""
    conn = connection()
    assert resp.resp(commands) == b"".join(conn.pack_commands(commands))
    assert b"".join(resp.packed(conn, commands)) == b"".join(conn.pack_commands(commands))


def test_a_command_name_redis_py_refuses_is_refused() -> None:
    conn = redis.Connection()
    with pytest.raises(TypeError):
        resp.resp([(5, "k")])
    with pytest.raises(TypeError):
        conn.pack_commands([(5, "k")])


@pytest.mark.parametrize("connection", CONNECTIONS)
@pytest.mark.parametrize("odd", [1.5, True, memoryview(b"mv"), 10**30 * 1.0])
def test_arguments_only_redis_py_converts_go_through_redis_py(odd: Any, connection: Any) -> None:
    conn = connection()
    commands = [("SET", "k", odd)]
    with pytest.raises(TypeError):
        resp.resp(commands)
    try:
        expected: Any = b"".join(conn.pack_commands(commands))
    except redis.DataError as exc:  # a bool: redis-py refuses it, typed, and so do we
        with pytest.raises(redis.DataError, match=str(exc)[:20]):
            resp.packed(conn, commands)
        return
    assert b"".join(resp.packed(conn, commands)) == expected


@pytest.mark.parametrize("connection", CONNECTIONS)
def test_another_encoding_is_left_to_redis_py(connection: Any) -> None:
    conn = connection(encoding="latin-1")
    commands = [("SET", "k", "café")]
    assert b"".join(resp.packed(conn, commands)) == b"".join(conn.pack_commands(commands))
    packer = getattr(conn, "_command_packer", None)
    if HiredisRespSerializer is None or not isinstance(packer, HiredisRespSerializer):
        # redis-py's own serializer encodes as the client does (with hiredis: UTF-8)
        assert "café".encode("latin-1") in b"".join(resp.packed(conn, commands))


_ARGS = st.one_of(
    st.text(),
    st.binary(),
    st.integers(min_value=-(2**70), max_value=2**70),
)


@pytest.mark.parametrize("connection", CONNECTIONS)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["SET", b"HSET", "CONFIG GET", b"CLIENT SETNAME", "get\t"])
        ).flatmap(lambda name: st.lists(_ARGS, max_size=6).map(lambda a: (*name, *a))),
        min_size=1,
        max_size=4,
    )
)
def test_any_batch_of_str_bytes_and_ints_is_packed_as_redis_py_packs_it(
    connection: Any, commands: list[tuple[Any, ...]]
) -> None:
    conn = connection()
    try:
        expected = b"".join(conn.pack_commands(commands))
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, refused by both
        with pytest.raises(UnicodeEncodeError):
            resp.packed(conn, commands)
        return
    assert b"".join(resp.packed(conn, commands)) == expected
    assert resp.resp(commands) == expected
