"""What an operation's round trips amount to, for telemetry: the bytes it writes and the
records it reads. No I/O; ``telemetry.py`` counts with these."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Commands the savers send on their own that write (everything else they send reads).
_WRITING = frozenset({"HSET", "HDEL", "DEL", "UNLINK", "ZADD", "ZREM", "SET", "EXPIRE", "PEXPIRE"})


def written_bytes(op: Any) -> int:
    """The bytes ``op`` (a ``Script``, ``Command``, ``Batch`` or a raw command tuple)
    writes: its byte arguments if it writes, 0 for a read."""
    from langgraph_durable.io.scripts import READ_ONLY

    if hasattr(op, "commands"):  # a Batch, and the commands it runs ahead
        return sum(written_bytes(c) for c in [*op.commands, *getattr(op, "ahead", ())])
    if hasattr(op, "name") and hasattr(op, "args"):  # a Script
        return 0 if op.name in READ_ONLY else _payload_bytes(op.args)
    args = getattr(op, "args", op)  # a Command, or a command as a tuple
    if isinstance(args, tuple | list) and args and str(args[0]).upper() in _WRITING:
        return _payload_bytes(args[1:])
    return 0


def _payload_bytes(args: Any) -> int:
    """The bytes among a round trip's arguments (nested one level for batches)."""
    total = 0
    for arg in _flat(args):
        if isinstance(arg, bytes | bytearray | memoryview):
            total += len(arg)
    return total


def records_in(reply: Any) -> int:
    """The non-empty bulk strings in a reply (nested replies flattened)."""
    return sum(1 for item in _flat(reply) if isinstance(item, bytes) and item)


def _flat(value: Any, depth: int = 0) -> Iterator[Any]:
    if isinstance(value, list | tuple) and depth < 4:
        for item in value:
            yield from _flat(item, depth + 1)
    else:
        yield value
