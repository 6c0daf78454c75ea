"""``@ledger.durable``: side-effecting calls inside ordinary nodes and Functional API tasks.

Owns the decorator and where such a call is recorded: its task (from LangGraph's
``get_config()``) and its position among the durable calls of that task attempt, so
they must be called in a deterministic order. A call's escalation (unknown outcome or
divergence) is raised at its own place in the node, in order with the node's own
``interrupt()`` calls. Outside a checkpointed graph the function just runs.

Functional API: decorate the function under ``@task`` (``@task`` / ``@ledger.durable`` /
``def``); LangGraph saves a finished task's result, the ledger covers a crash inside the
task. Over a ``@task`` it is refused (``wiring.refuse_task``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from langgraph_durable.ledger.calls import begin, recorded_run
from langgraph_durable.ledger.context import LedgerContext, task_of
from langgraph_durable.ledger.entries import Policy
from langgraph_durable.ledger.escalations import ask, escalate_inline
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.policies import check_policy
from langgraph_durable.ledger.sequences import CallSequence, LoadOnce, arun, run
from langgraph_durable.ledger.sites import Site, TaskContext, call_site
from langgraph_durable.ledger.store import load
from langgraph_durable.ledger.wiring import refuse_task


def durable(
    lctx: LedgerContext,
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    policy: Policy | None = None,
) -> Any:
    """``ToolLedger.durable``: ``fn`` (or, without it, a decorator) recorded by the
    ledger of ``lctx`` when called inside a graph task."""
    if policy is not None:
        check_policy(policy)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        refuse_task(func)
        call_name = name or getattr(func, "__name__", "call")

        def sequence(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
            """The saver and the sequence of this call, or None to run it unrecorded."""
            effective = policy or lctx.policy(call_name)
            found = None if effective == "readonly" else task_of(lctx, _config())
            if found is None:
                return None
            recording, ctx = found
            call = functools.partial(func, *args, **kwargs)
            steps = durable_sequence(recording, ctx, call_name, args, kwargs, effective, call)
            return recording.recording_saver, steps

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                found = sequence(args, kwargs)
                if found is None:
                    return await func(*args, **kwargs)
                return await arun(*found)

            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            found = sequence(args, kwargs)
            return func(*args, **kwargs) if found is None else run(*found)

        return wrapper

    return decorate(fn) if fn is not None else decorate


def _config() -> Any:
    """The running task's config (LangGraph's ``get_config()``), or None outside one."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return None


def durable_sequence(
    lctx: LedgerContext,
    ctx: TaskContext,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    policy: Policy,
    call: Callable[[], Any],
) -> CallSequence[Any]:
    """A ``@durable`` call's sequence (``sequences.py``): the task's entries read once,
    the call's place taken, its escalation asked inline, its intent begun, then the
    recorded result, or the call run and its outcome recorded."""
    yield LoadOnce(ctx, lambda: load(lctx, ctx, Lineage()))
    site = _site(lctx, ctx, name, args, kwargs)
    escalated = yield escalate_inline(lctx, ctx, site, policy)
    if escalated is not None:
        # at its own place in the node, in order with the node's own interrupt() calls
        ask(ctx, [(slot, escalated) for slot in escalated.escalations])
    decision = yield begin(lctx, ctx, site, policy)
    if decision.replay:
        return decision.value
    return (yield from recorded_run(lctx, site, decision, call))


def _site(
    lctx: LedgerContext, ctx: TaskContext, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Site:
    """Where this durable call is recorded: at its order among the task's."""
    with ctx.lock:
        position = ctx.positions
        ctx.positions += 1
    return call_site(
        lctx.keys,
        ctx,
        name,
        {"args": list(args), "kwargs": kwargs},
        tool_call_id=None,
        position=position,
    )
