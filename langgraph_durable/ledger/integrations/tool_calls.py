"""ToolNode calls through the ledger: ``wrap_tool_call`` / ``awrap_tool_call`` and
``ledger.tool_node(tools)``.

Owns where a ToolNode call is recorded (its task attempt, its index in its AI message,
its policy, the journaled answers it came from) and its sequence: the task's entries
read once with every call of its AI message (the questions numbered and asked under the
task's lock, ``escalations.py``), its intent begun at its place, then the tool run and
its outcome recorded (``calls.recorded_run``). The sync and async shells drive the same
sequence (``sequences.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.ledger.calls import begin, recorded_run
from langgraph_durable.ledger.context import LedgerContext, task_of
from langgraph_durable.ledger.entries import LedgerEntry, Policy
from langgraph_durable.ledger.escalations import ask, prepare_parallel
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.policies import hinted_policy
from langgraph_durable.ledger.sequences import CallSequence, LoadOnce, arun, run
from langgraph_durable.ledger.sites import TaskContext, call_site, position_in_message
from langgraph_durable.ledger.wiring import refuse_sync_on_loop


@dataclass(frozen=True)
class ToolCall:
    """One ToolNode call: what records it, its task attempt, where it sits in its AI
    message, its policy and the journaled answers its AI message came from."""

    lctx: LedgerContext
    ctx: TaskContext
    call: dict[str, Any]
    position: int | None
    message_calls: list[dict[str, Any]]
    policy: Policy
    hint: Policy | None
    lineage: Lineage
    answers: list[LedgerEntry]


def tool_call(lctx: LedgerContext, request: Any) -> ToolCall | None:
    """The recorded call ``request`` (a ToolNode ``ToolCallRequest``) makes, or None for a
    call that runs unrecorded (a read-only tool, or outside a checkpointed task)."""
    call = request.tool_call
    tool = getattr(request, "tool", None)
    hint = hinted_policy(tool) if lctx.use_tool_hints and tool is not None else None
    policy = lctx.policy(call["name"], hint)
    if policy == "readonly":
        return None
    found = task_of(lctx, getattr(getattr(request, "runtime", None), "config", None))
    if found is None:
        return None
    recording, ctx = found
    position, message_calls, message_id = position_in_message(request.state, call)
    call_ids = frozenset(str(c["id"]) for c in message_calls if c.get("id"))
    answers = recording.memory.answers_of(ctx.place.thread_id, call_ids)
    lineage = Lineage(
        call_ids=call_ids, journaled=bool(answers), message_id=message_id, steered=False
    )
    ctx.message_id = ctx.message_id or message_id
    return ToolCall(recording, ctx, call, position, message_calls, policy, hint, lineage, answers)


def tool_sequence(found: ToolCall, execute: Callable[[], Any]) -> CallSequence[Any]:
    """A ToolNode call's sequence: the task loaded and its questions asked once, its
    intent begun, then the recorded result, or the tool run (``execute()``) and its
    outcome recorded."""
    lctx, ctx = found.lctx, found.ctx
    yield LoadOnce(
        ctx,
        lambda: prepare_parallel(lctx, ctx, found.message_calls, found.lineage),
        lambda escalations: _loaded(found, escalations),
    )
    call = found.call
    site = call_site(
        lctx.keys,
        ctx,
        call["name"],
        call.get("args", {}),
        tool_call_id=call.get("id"),
        position=found.position,
    )
    decision = yield begin(lctx, ctx, site, found.policy, found.hint)
    if decision.replay:
        return decision.value
    return (yield from recorded_run(lctx, site, decision, execute))


def _loaded(found: ToolCall, escalations: list[Any]) -> None:
    """After the task's load: its first intent settles the journaled answers its AI
    message came from (journal.py); then its questions are asked."""
    ctx = found.ctx
    ctx.unsettled = [e for e in found.answers if not e.settled and e.execution]
    ask(ctx, escalations)


def wrap_tool_call(lctx: LedgerContext, request: Any, execute: Callable[[Any], Any]) -> Any:
    """``ToolNode(wrap_tool_call=...)``: replay a recorded result or record this call."""
    found = tool_call(lctx, request)
    if found is None:
        return execute(request)
    saver = found.lctx.recording_saver
    refuse_sync_on_loop(saver)
    return run(saver, tool_sequence(found, lambda: execute(request)))


async def awrap_tool_call(
    lctx: LedgerContext, request: Any, execute: Callable[[Any], Awaitable[Any]]
) -> Any:
    """``ToolNode(awrap_tool_call=...)``: ``wrap_tool_call`` for async runs."""
    found = tool_call(lctx, request)
    if found is None:
        return await execute(request)
    return await arun(found.lctx.recording_saver, tool_sequence(found, lambda: execute(request)))


def tool_node(ledger: Any, tools: Sequence[Any], **kwargs: Any) -> Any:
    """A LangGraph ``ToolNode`` over ``tools`` whose calls go through ``ledger`` (its
    ``wrap_tool_call`` and ``awrap_tool_call``)."""
    taken = sorted({"wrap_tool_call", "awrap_tool_call"} & kwargs.keys())
    if taken:
        raise ConfigurationError(
            f"tool_node() wires {' and '.join(taken)} itself; to compose your own "
            "wrapper, build the ToolNode by hand and call the ledger's from it"
        )
    from langgraph.prebuilt import ToolNode

    return ToolNode(
        tools,
        wrap_tool_call=ledger.wrap_tool_call,
        awrap_tool_call=ledger.awrap_tool_call,
        **kwargs,
    )
