"""Watching and stepping plans through a saver's public drivers (no shell internals)."""

from __future__ import annotations

from typing import Any

from langgraph_durable.base import BaseRedisSaver
from langgraph_durable.ops import Batch, Emit, Plan, Script


def recorded(plan: Plan[Any], ops: list[Any]) -> Plan[Any]:
    """``plan``, appending each operation it yields to ``ops`` (an Emit is no round trip)."""
    reply = None
    while True:
        try:
            op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        if not isinstance(op, Emit):
            ops.append(op)
        reply = yield op


class RoundTrips:
    """Counts the operations (round trips) of every plan ``saver`` drives from sync code."""

    def __init__(self, saver: BaseRedisSaver) -> None:
        self.ops: list[Any] = []
        drive, drive_iter = saver.drive, saver.drive_iter
        saver.drive = lambda plan: drive(recorded(plan, self.ops))  # type: ignore[method-assign]
        saver.drive_iter = lambda plan: drive_iter(recorded(plan, self.ops))  # type: ignore[method-assign]

    def reset(self) -> int:
        """The round trips since the last reset."""
        n, self.ops = len(self.ops), []
        return n

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
