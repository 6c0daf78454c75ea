"""A recorded call's sequence (load the task's entries, escalate, begin), written once for
both shells.

Owns how a sequence is driven. A *sequence* is a generator that yields the ledger's plans
in the order a call needs them and is sent each plan's result, as a plan yields Redis
operations and is sent the replies: ``run`` drives it with the saver's ``drive`` (sync
code), ``arun`` with ``adrive`` (async code). The only things the two do differently are
the task's lock (``threading.Lock`` or ``asyncio.Lock``) and how they wait; what runs, in
which order, under which lock, is the sequence's. Rules it keeps:
  * ``LoadOnce``: the task's entries are read once per task attempt, under its lock, so
    parallel calls of one task share one read (the first one in makes it; its ``then``
    runs under the lock too, before any other call of the task goes on).
  * ``Locked``: a plan run whole under the task's lock (a model call's look-up claims its
    place and reads what it may replay in one go).
  * Everything else a sequence yields is a plan, driven as it is.
Running the recorded call itself is not in a sequence: it is the caller's own code, sync
or async (``running.py`` records its outcome).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_durable.core.ops import Plan, traced
from langgraph_durable.ledger.sites import TaskContext

T = TypeVar("T")


@dataclass(frozen=True)
class LoadOnce:
    """Run ``plan()`` under the task's lock unless the task is loaded, mark it loaded,
    then ``then`` with the plan's result, still under the lock (it may raise: an
    escalation's ``interrupt()``; the task stays loaded). Sent back: None."""

    ctx: TaskContext
    plan: Callable[[], Plan[Any]]
    then: Callable[[Any], None] = lambda _: None


@dataclass(frozen=True)
class Locked:
    """Run ``plan`` under the task's lock. Sent back: its result."""

    ctx: TaskContext
    plan: Plan[Any]


CallSequence = Generator["Plan[Any] | LoadOnce | Locked", Any, T]


def run(saver: Any, sequence: CallSequence[T]) -> T:
    """Drive ``sequence`` from sync code (``saver.drive``)."""
    reply: Any = None
    thread_id: str | None = None
    while True:
        try:
            step = sequence.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(step, LoadOnce):
            thread_id = getattr(step.ctx.place, "thread_id", None)
            with step.ctx.lock:
                if not step.ctx.loaded:
                    loaded = saver.drive(_traced(step.plan(), thread_id))
                    step.ctx.loaded = True
                    step.then(loaded)
            reply = None
        elif isinstance(step, Locked):
            thread_id = getattr(step.ctx.place, "thread_id", None)
            with step.ctx.lock:
                reply = saver.drive(_traced(step.plan, thread_id))
        else:
            reply = saver.drive(_traced(step, thread_id))


async def arun(saver: Any, sequence: CallSequence[T]) -> T:
    """Drive ``sequence`` from async code (``saver.adrive``)."""
    reply: Any = None
    thread_id: str | None = None
    while True:
        try:
            step = sequence.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(step, LoadOnce):
            thread_id = getattr(step.ctx.place, "thread_id", None)
            async with step.ctx.alock:
                if not step.ctx.loaded:
                    loaded = await saver.adrive(_traced(step.plan(), thread_id))
                    step.ctx.loaded = True
                    step.then(loaded)
            reply = None
        elif isinstance(step, Locked):
            thread_id = getattr(step.ctx.place, "thread_id", None)
            async with step.ctx.alock:
                reply = await saver.adrive(_traced(step.plan, thread_id))
        else:
            reply = await saver.adrive(_traced(step, thread_id))


def _traced(plan: Plan[T], thread_id: str | None) -> Plan[T]:
    """The ledger's plan as an operation of its own (``ledger.begin``, ``ledger.finish``...)
    for the saver's telemetry, named after the plan's function."""
    name = getattr(plan, "__name__", "plan").strip("_")
    return traced(f"ledger.{name}", plan, thread_id)
