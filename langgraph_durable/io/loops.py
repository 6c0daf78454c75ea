"""The loops that run a plan's steps: every call a step makes is one round trip.

Owns answering each step ``io/driver.py``'s ``Driver._steps`` yields: a call made (and
made again while the server is lost, within ``failover_timeout``: ``failover.py``), a
``Pause`` slept, an ``Emit`` handed to the caller. Two sync loops and two async ones,
each answering a step the same way (``_step``, ``_astep``): a listing reads items as
they come (``run_calls``, ``arun_calls``: generators), every other operation only wants
the result (``run_to_end``, ``arun_to_end``: no generator between the caller and the
plan's steps; an async generator's every step is an awaitable of its own, and its end a
StopAsyncIteration).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_durable.core.ops import Emit
from langgraph_durable.core.walk import Walk

if TYPE_CHECKING:
    from langgraph_durable.io.failover import Failover
    from langgraph_durable.io.pipelines import Call

T = TypeVar("T")
Steps = Generator["Call | Emit[Any] | Pause", Any, T]


@dataclass(frozen=True)
class Pause:
    """Wait this long before the next call (``time.sleep`` or ``asyncio.sleep``)."""

    seconds: float


def run_calls(steps: Steps[T], failover: Failover) -> Generator[Any, None, T]:
    """Make each call ``steps`` yields, yield each emitted item, return its result."""
    try:
        return (yield from _run_calls(steps, failover))
    except BaseException:  # interrupted (KeyboardInterrupt...): the steps end now, not at GC
        steps.close()
        raise


def _run_calls(steps: Steps[T], failover: Failover) -> Generator[Any, None, T]:
    walk = Walk(steps)
    for step in walk:
        if isinstance(step, Emit):
            yield step.item
        else:
            _step(walk, step, failover)
    return walk.result


def run_to_end(steps: Steps[T], failover: Failover) -> T:
    """``run_calls`` for a caller that reads no item (emitted items are dropped): its
    result, returned, with no generator between the caller and the plan's steps."""
    walk = Walk(steps)
    try:
        for step in walk:
            if not isinstance(step, Emit):
                _step(walk, step, failover)
    except BaseException:  # interrupted (KeyboardInterrupt...): the steps end now, not at GC
        steps.close()
        raise
    return walk.result


def _step(walk: Walk[Any], step: Any, failover: Failover) -> None:
    """Answer one step of ``walk`` that is not an ``Emit``: sleep a ``Pause``, or make the
    call (again while the server is lost, within the failover budget)."""
    if isinstance(step, Pause):
        time.sleep(step.seconds)
        return
    attempts = None  # made at the first failure: a call that goes through needs none
    while True:
        began = failover.clock()
        try:
            walk.reply = step()
        except Exception as exc:  # noqa: BLE001 - handed to the plan's driver step
            attempts = attempts or failover.attempts()
            if (delay := _again(walk, step, attempts, exc, began)) is None:
                return
            time.sleep(delay)
        else:
            failover.connected = True
            return


async def arun_calls(
    steps: Steps[Any], failover: Failover, result: list[Any]
) -> AsyncIterator[Any]:
    """``run_calls`` awaiting each call; its result is put in ``result`` (an async
    generator returns nothing)."""
    try:
        async for item in _arun_calls(steps, failover, result):
            yield item
    except BaseException:  # cancelled: the steps end now, not at GC
        steps.close()
        raise


async def _arun_calls(
    steps: Steps[Any], failover: Failover, result: list[Any]
) -> AsyncIterator[Any]:
    walk = Walk(steps)
    for step in walk:
        if isinstance(step, Emit):
            yield step.item
        else:
            await _astep(walk, step, failover)
    result.append(walk.result)


async def arun_to_end(steps: Steps[T], failover: Failover) -> T:
    """``arun_calls`` for a caller that reads no item (emitted items are dropped): its
    result, returned."""
    walk = Walk(steps)
    try:
        for step in walk:
            if not isinstance(step, Emit):
                await _astep(walk, step, failover)
    except BaseException:  # cancelled: the steps end now, not at GC
        steps.close()
        raise
    return walk.result


async def _astep(walk: Walk[Any], step: Any, failover: Failover) -> None:
    """Answer one step of ``walk`` that is not an ``Emit``: sleep a ``Pause``, or make the
    call (again while the server is lost, within the failover budget)."""
    if isinstance(step, Pause):
        await asyncio.sleep(step.seconds)
        return
    attempts = None  # as in _step
    while True:
        began = failover.clock()
        try:
            walk.reply = await step()
        except Exception as exc:  # noqa: BLE001 - handed to the plan's driver step
            attempts = attempts or failover.attempts()
            if (delay := _again(walk, step, attempts, exc, began)) is None:
                return
            await asyncio.sleep(delay)
        else:
            failover.connected = True
            return


def _again(walk: Walk[Any], step: Any, attempts: Any, exc: Exception, began: float) -> float | None:
    """How long to wait before ``step`` goes again after ``exc`` (a lost server, within
    ``failover_timeout``), or None: then the error to throw into the plan is set."""
    try:
        if not getattr(step, "failover_retry", True):
            raise exc
        return attempts.again(exc, began)  # type: ignore[no-any-return]
    except Exception as final:  # noqa: BLE001 - handed to the plan's driver step
        walk.error = final
        return None
