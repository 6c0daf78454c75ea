"""Watching and stepping plans through a saver's public drivers (no shell internals)."""

from __future__ import annotations

from typing import Any

from langgraph_durable.base import BaseRedisSaver
from langgraph_durable.core.ops import Batch, Emit, Plan, Script


def before_each(plan: Plan[Any], hook: Any) -> Plan[Any]:
    """``plan``, calling ``hook(op)`` just before each operation goes out (to make
    something happen between two of its round trips, deterministically)."""
    reply = None
    while True:
        try:
            op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        hook(op)
        reply = yield op


def recorded(plan: Plan[Any], ops: list[Any], replies: list[Any] | None = None) -> Plan[Any]:
    """``plan``, appending each operation it yields to ``ops`` (an Emit is no round trip)
    and, given ``replies``, each reply it gets there."""
    reply = None
    while True:
        try:
            op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        if not isinstance(op, Emit):
            ops.append(op)
        reply = yield op
        if replies is not None and not isinstance(op, Emit):
            replies.append(reply)


class RoundTrips:
    """Counts the operations (round trips) of every plan ``saver`` drives from sync code."""

    def __init__(self, saver: BaseRedisSaver) -> None:
        self.ops: list[Any] = []
        self.replies: list[Any] = []
        drive, drive_iter = saver.drive, saver.drive_iter
        saver.drive = lambda plan: drive(recorded(plan, self.ops, self.replies))  # type: ignore[method-assign]
        saver.drive_iter = lambda plan: drive_iter(recorded(plan, self.ops, self.replies))  # type: ignore[method-assign]

    def reset(self) -> int:
        """The round trips since the last reset."""
        n, self.ops, self.replies = len(self.ops), [], []
        return n

    def checkpoints_read(self) -> int:
        """How many checkpoint records the read scripts returned since the last reset
        (each is verified and deserialized)."""
        count = 0
        for op, reply in zip(self.ops, self.replies):
            pairs = zip(op.commands, reply) if isinstance(op, Batch) else [(op, reply)]
            for command, answer in pairs:
                if isinstance(command, Script) and command.name == "read_checkpoints":
                    count += len(answer) - 2  # wrong-type keys, unindexed, then entries
        return count

    def values_read(self, key: str) -> int:
        """How many fields of the hash ``key`` the HMGETs since the last reset asked for."""
        return sum(
            len(o) - 2
            for op in self.ops
            for o in (op.commands if isinstance(op, Batch) else [op])
            if isinstance(o, tuple) and o[:2] == ("HMGET", key)
        )

    def scripts(self, name: str) -> int:
        """How many calls of the script ``name`` were made, alone or in a batch."""
        return sum(
            isinstance(o, Script) and o.name == name
            for op in self.ops
            for o in (op.commands if isinstance(op, Batch) else [op])
        )


def one(op: Any) -> Plan[Any]:
    """A plan of the single operation ``op``: drive it to run ``op`` and get its reply."""
    return (yield op)


def elements_sent(op: Any, el: str, writes: bool = True) -> list[bytes]:
    """The digests of the elements round trip ``op`` sends: a put's by HSET ahead of its
    script (the big ones) and inside the script call (put_checkpoint.lua's "sent" and
    "inline" layouts); with ``writes``, put_writes' too."""
    commands = op.commands if isinstance(op, Batch) else [op]
    sent = [c[2] for c in commands if isinstance(c, tuple) and c[:2] == ("HSET", el)]
    for script in commands:
        if writes and isinstance(script, Script) and script.name == "put_writes":
            sent += script.args[3 : 3 + 2 * int(script.args[2]) : 2]
        if not (isinstance(script, Script) and script.name == "put_checkpoint"):
            continue
        args = script.args
        kept = int(args[9])
        unwritten = int(args[10 + kept])
        mode = 13 + kept + 2 * unwritten
        if args[mode] == "inline":
            sent += args[mode + 1 : mode + 1 + 2 * int(args[mode - 1]) : 2]
            continue
        at = mode + 1 + int(args[mode - 1])  # past the digests of those sent ahead
        at += 1 + int(args[at])  # past the values sent ahead
        sent += args[at + 1 : at + 1 + 2 * int(args[at]) : 2]
    return sent
