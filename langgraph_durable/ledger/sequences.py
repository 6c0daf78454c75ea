"""A recorded call's sequence (load the task's entries, ask, begin, run, record), written
once for both shells.

Owns how a sequence is driven. A *sequence* is a generator that yields the ledger's plans
(and the steps below) in the order a call needs them and is sent each one's result, as
a plan yields Redis operations and is sent the replies: ``run`` drives it from sync
code (each plan with the saver's ``drive``), ``arun`` from async code (``adrive``). The
only things the two do differently are how they take the task's lock
(``threading.Lock`` or ``asyncio.Lock``) and how they wait (for a plan, or for the
caller's own code); what runs, in which order, under which lock, is the sequence's.
Steps:
  * ``LoadOnce``: the task's entries are read once per task attempt, under its lock, so
    parallel calls of one task share one read (the first one in makes it; its ``then``
    runs under the lock too, before any other call of the task goes on).
  * ``Locked``: a plan run whole under the task's lock (a model call's look-up claims its
    place and reads what it may replay in one go).
  * ``Invoke``: the caller's own code (the tool, the model), called, or awaited in async
    code; what it raises is thrown back into the sequence (which records it).
  * Everything else a sequence yields is a plan, driven as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_durable.core.ops import Plan, traced
from langgraph_durable.core.walk import Walk
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


@dataclass(frozen=True)
class Invoke:
    """Call the caller's own code (awaited in async code: ``call`` then returns an
    awaitable). Sent back: its return; what it raises is thrown back in."""

    call: Callable[[], Any]


CallSequence = Generator["Plan[Any] | LoadOnce | Locked | Invoke", Any, T]


class _Walk(Walk[T]):
    """A sequence's steps (``core/walk.py``), with what both loops do for each."""

    def __init__(self, sequence: CallSequence[T]) -> None:
        super().__init__(sequence)
        self._ctx: TaskContext | None = None  # the task of the last step that named one

    @property
    def thread_id(self) -> str | None:
        return None if self._ctx is None else getattr(self._ctx.place, "thread_id", None)

    def plan(self, step: Any) -> Plan[Any] | None:
        """The plan to drive for ``step`` (under its lock, if it takes one), or None."""
        if isinstance(step, LoadOnce | Locked):
            self._ctx = step.ctx
        if isinstance(step, LoadOnce):
            return None if step.ctx.loaded else _traced(step.plan(), self.thread_id)
        return _traced(step.plan if isinstance(step, Locked) else step, self.thread_id)

    def driven(self, step: Any, result: Any) -> None:
        """``step``'s plan gave ``result`` (still under its lock)."""
        if isinstance(step, LoadOnce):
            if not step.ctx.loaded:
                step.ctx.loaded = True
                step.then(result)
            return
        self.reply = result


def _lock(step: Any) -> AbstractContextManager[Any]:
    return step.ctx.lock if isinstance(step, LoadOnce | Locked) else nullcontext()


def _alock(step: Any) -> AbstractAsyncContextManager[Any]:
    return step.ctx.alock if isinstance(step, LoadOnce | Locked) else nullcontext()


def run(saver: Any, sequence: CallSequence[T]) -> T:
    """Drive ``sequence`` from sync code (``saver.drive``)."""
    walk = _Walk(sequence)
    for step in walk:
        try:
            if isinstance(step, Invoke):
                walk.reply = step.call()
                continue
            with _lock(step):
                plan = walk.plan(step)
                walk.driven(step, None if plan is None else saver.drive(plan))
        except BaseException as exc:  # noqa: BLE001 - thrown back into the sequence
            walk.error = exc
    return walk.result


async def arun(saver: Any, sequence: CallSequence[T]) -> T:
    """Drive ``sequence`` from async code (``saver.adrive``)."""
    walk = _Walk(sequence)
    for step in walk:
        try:
            if isinstance(step, Invoke):
                walk.reply = await step.call()
                continue
            async with _alock(step):
                plan = walk.plan(step)
                walk.driven(step, None if plan is None else await saver.adrive(plan))
        except BaseException as exc:  # noqa: BLE001 - thrown back into the sequence
            walk.error = exc
    return walk.result


def _traced(plan: Plan[T], thread_id: str | None) -> Plan[T]:
    """The ledger's plan as an operation of its own (``ledger.begin``, ``ledger.finish``...)
    for the saver's telemetry, named after the plan's function."""
    name = getattr(plan, "__name__", "plan").strip("_")
    return traced(f"ledger.{name}", plan, thread_id)
