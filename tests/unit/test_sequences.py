"""A recorded call's sequence (``ledger/sequences.py``) driven from sync and async code
the same way: the task's entries read once, under its lock, also when its first reader's
follow-up raises; a locked plan's result sent back; plain plans driven as they are; the
caller's own code called (awaited in async code), its result sent back and its error
thrown back in, so the sequence records it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langgraph_durable.core.ops import Plan
from langgraph_durable.ledger.sequences import CallSequence, Invoke, LoadOnce, Locked, arun, run
from langgraph_durable.ledger.sites import TaskContext


class Saver:
    """Drives a plan by answering each operation with its own text (no Redis)."""

    def __init__(self) -> None:
        self.driven: list[str] = []

    def drive(self, plan: Plan[Any]) -> Any:
        reply: Any = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            self.driven.append(op)
            reply = f"reply to {op}"

    async def adrive(self, plan: Plan[Any]) -> Any:
        return self.drive(plan)


def plan(name: str) -> Plan[str]:
    reply = yield name
    return f"{name} -> {reply}"


def sequence(ctx: TaskContext, then: Any) -> CallSequence[list[Any]]:
    yield LoadOnce(ctx, lambda: plan("load"), then)
    locked = yield Locked(ctx, plan("look-up"))
    begun = yield plan("begin")
    return [locked, begun]


def context() -> TaskContext:
    return TaskContext(scratchpad=object(), place=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_a_sequence_runs_its_plans_in_order_and_loads_once(shell: str) -> None:
    saver, ctx, loaded = Saver(), context(), []
    go = (lambda s: run(saver, s)) if shell == "sync" else (lambda s: asyncio.run(arun(saver, s)))
    first = go(sequence(ctx, loaded.append))
    second = go(sequence(ctx, loaded.append))
    assert first == second == ["look-up -> reply to look-up", "begin -> reply to begin"]
    assert saver.driven == ["load", "look-up", "begin", "look-up", "begin"]
    assert loaded == ["load -> reply to load"] and ctx.loaded


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_the_task_stays_loaded_when_the_first_readers_follow_up_raises(shell: str) -> None:
    """An escalation asked under the lock raises (``interrupt()``): the other calls of the
    task do not read its entries again."""
    saver, ctx = Saver(), context()

    def ask(_: Any) -> None:
        raise RuntimeError("interrupt")

    with pytest.raises(RuntimeError, match="interrupt"):
        if shell == "sync":
            run(saver, sequence(ctx, ask))
        else:
            asyncio.run(arun(saver, sequence(ctx, ask)))
    assert ctx.loaded and not ctx.lock.locked()
    assert run(saver, sequence(ctx, ask))[1] == "begin -> reply to begin"
    assert saver.driven.count("load") == 1


def recording(call: Any) -> CallSequence[Any]:
    """As ``calls.recorded_run``: the call, then its outcome recorded (a plan)."""
    try:
        result = yield Invoke(call)
    except ValueError as exc:
        yield plan(f"error {exc}")
        raise
    yield plan(f"result {result}")
    return result


def shell_of(shell: str, saver: Saver) -> Any:
    return (lambda s: run(saver, s)) if shell == "sync" else (lambda s: asyncio.run(arun(saver, s)))


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_the_callers_code_runs_between_plans_and_its_result_is_sent_back(shell: str) -> None:
    saver, calls = Saver(), []

    def tool() -> str:
        calls.append(saver.driven[:])  # what was driven before it ran
        return "done"

    async def atool() -> str:
        return tool()

    assert shell_of(shell, saver)(recording(tool if shell == "sync" else atool)) == "done"
    assert calls == [[]] and saver.driven == ["result done"]


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_the_callers_error_is_thrown_back_in_recorded_and_raised(shell: str) -> None:
    saver = Saver()

    def tool() -> str:
        raise ValueError("card declined")

    async def atool() -> str:
        return tool()

    with pytest.raises(ValueError, match="card declined"):
        shell_of(shell, saver)(recording(tool if shell == "sync" else atool))
    assert saver.driven == ["error card declined"]


def test_a_cancelled_call_records_nothing_and_is_cancelled() -> None:
    """A ``CancelledError`` (not an ``Exception``) passes through the sequence."""
    saver, started = Saver(), asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    async def main() -> None:
        task = asyncio.create_task(arun(saver, recording(slow)))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert saver.driven == []
