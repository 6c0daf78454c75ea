"""The driver's two loops (``io/driver.py``) over scripted calls, no Redis: what a plan
step yields is made (sync) or awaited (asyncio) the same way; an emitted item comes out;
a call that lost its server goes again, one marked ``once`` does not; an error reaches
the step that yielded the call; a ``Pause`` waits without a call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from langgraph_durable.core.ops import Emit
from langgraph_durable.io.failover import Failover
from langgraph_durable.io.loops import Pause, Steps, arun_calls, arun_to_end, run_calls, run_to_end
from langgraph_durable.io.pipelines import once


def flaky(replies: list[Any]) -> Callable[[], Any]:
    """A call answering ``replies`` in turn: an exception in the list is raised."""

    def call() -> Any:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return call


def as_async(call: Callable[[], Any]) -> Callable[[], Any]:
    async def awaited() -> Any:
        return call()

    awaited.failover_retry = getattr(call, "failover_retry", True)  # type: ignore[attr-defined]
    return awaited


def scripted(wrap: Callable[[Callable[[], Any]], Callable[[], Any]]) -> Steps[list[Any]]:
    """Steps as a plan's driver step makes them: calls, an item, a pause, a failing call."""
    seen = [(yield wrap(flaky([RedisConnectionError("lost"), "after a failover"])))]
    yield Emit("an item")
    yield Pause(0)
    try:
        yield wrap(once(flaky([RedisConnectionError("lost once")])))
    except RedisConnectionError as exc:
        seen.append(f"thrown back: {exc}")
    seen.append((yield wrap(flaky(["plain"]))))
    return seen


EXPECTED = ["after a failover", "thrown back: lost once", "plain"]


def connected_failover() -> Failover:
    failover = Failover(timeout=5.0)
    failover.connected = True  # a round trip got through before: a loss is a failover
    return failover


def test_the_sync_loop() -> None:
    items = run_calls(scripted(lambda c: c), connected_failover())
    emitted = []
    with pytest.raises(StopIteration) as stop:
        while True:
            emitted.append(next(items))
    assert emitted == ["an item"]
    assert stop.value.value == EXPECTED


def test_the_sync_loop_to_the_end_returns_the_same_result() -> None:
    """``run_to_end`` (what every sync operation but a listing runs): the same calls,
    failovers and errors thrown back, the result returned, items dropped."""
    assert run_to_end(scripted(lambda c: c), connected_failover()) == EXPECTED


def test_the_sync_loop_to_the_end_closes_the_steps_when_interrupted() -> None:
    closed = []

    def steps() -> Steps[Any]:
        def interrupted() -> Any:
            raise KeyboardInterrupt

        try:
            yield interrupted
        finally:
            closed.append(True)

    held = steps()  # held: the steps end because the loop closed them, not at GC
    with pytest.raises(KeyboardInterrupt):
        run_to_end(held, connected_failover())
    assert closed == [True]


def test_the_asyncio_loop_does_the_same() -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        result: list[Any] = []
        emitted = [
            item async for item in arun_calls(scripted(as_async), connected_failover(), result)
        ]
        return emitted, result

    emitted, result = asyncio.run(run())
    assert emitted == ["an item"]
    assert result == [EXPECTED]


def test_the_asyncio_loop_to_the_end_returns_the_same_result() -> None:
    """``arun_to_end`` (what every async operation but a listing runs): the same calls,
    failovers and errors thrown back, the result returned, items dropped."""
    assert asyncio.run(arun_to_end(scripted(as_async), connected_failover())) == EXPECTED


def test_the_asyncio_loop_to_the_end_closes_the_steps_when_cancelled() -> None:
    closed = []

    def steps() -> Steps[Any]:
        async def forever() -> Any:
            await asyncio.Event().wait()

        try:
            yield forever
        finally:
            closed.append(True)

    async def run() -> None:
        task = asyncio.ensure_future(arun_to_end(steps(), connected_failover()))
        await asyncio.sleep(0)  # the call awaits
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert closed == [True]


def test_a_lost_server_before_any_round_trip_is_no_failover() -> None:
    """A wrong URL or a server not started: raised at once, not retried for 15 s."""

    def steps() -> Steps[Any]:
        return (yield flaky([RedisConnectionError("refused"), "never"]))

    with pytest.raises(RedisConnectionError, match="refused"):
        next(run_calls(steps(), Failover(timeout=5.0)))
