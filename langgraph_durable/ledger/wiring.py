"""How the ledger is plugged into LangGraph, and the wirings it refuses with advice.

Owns the traps between LangGraph's integration points and the ledger:
  * A ToolNode given only ``awrap_tool_call`` calls nothing of the ledger in a sync run
    (LangGraph's sync path uses ``wrap_tool_call`` alone), so the ledger cannot even
    warn: ``ToolLedger.tool_node`` builds a node wired for both.
  * A ToolNode given only ``wrap_tool_call`` calls it on the event loop in an async run,
    where an ``AsyncRedisSaver`` cannot be waited for: refused, naming the missing
    ``awrap_tool_call`` (``refuse_sync_on_loop``); so is a journaled model's sync call
    there, naming ``ainvoke``/``astream``.
  * A ``ToolLedger()`` without a saver uses the saver the run's task executes with
    (``run_saver``): in LangGraph Server the graph's checkpointer is the server's, so no
    second saver is needed. A graph on another checkpointer is refused, naming it.
  * ``@ledger.durable`` stacked over a Functional API ``@task`` would record the task's
    future, not its result: refused at decoration, naming the order that works
    (``@task`` over ``@ledger.durable``); a durable function returning any future is
    refused before its result is recorded (``check_recordable``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from langgraph_durable.core.errors import ConfigurationError

T = TypeVar("T")


def _is_saver(obj: Any) -> bool:
    # By the class's own methods, not isinstance (the saver's modules import this
    # package): a wrapper forwarding attributes to a saver has them on instances only.
    return all(callable(getattr(type(obj), m, None)) for m in ("drive", "adrive")) and hasattr(
        obj, "core"
    )


def durable_saver(found: Any) -> Any:
    """``found`` if it is a langgraph-durable saver, or the one it wraps; else None.

    LangGraph Server hands a graph an adapter around the saver that forwards every
    other attribute to it: a method reached through it is bound to the saver itself."""
    if _is_saver(found):
        return found
    inner = getattr(getattr(found, "adrive", None), "__self__", None)
    return inner if _is_saver(inner) else None


def run_saver(config: RunnableConfig) -> Any:
    """The langgraph-durable saver the task of ``config`` runs with (LangGraph lends each
    task its graph's checkpointer in the config); ``ConfigurationError`` if there is none."""
    found = config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    saver = durable_saver(found)
    if saver is None:
        what = "no checkpointer" if found is None else type(found).__name__
        raise ConfigurationError(
            f"a ToolLedger() without a saver records in the checkpointer its graph runs "
            f"with, and this graph runs with {what}: compile it with a langgraph-durable "
            "RedisSaver or AsyncRedisSaver (in LangGraph Server, name "
            "langgraph_durable.server.checkpointer in langgraph.json), or pass the saver "
            "to ToolLedger(saver)"
        )
    return saver


_TOOL_ADVICE = (
    "the ledger's sync wrap_tool_call was called inside an async run "
    "(ainvoke/astream): LangGraph does that when a ToolNode has no awrap_tool_call, "
    "and an AsyncRedisSaver cannot be waited for on its own event loop. Pass "
    "awrap_tool_call=ledger.awrap_tool_call as well, or build the node with "
    "ledger.tool_node(tools)"
)
MODEL_ADVICE = (
    "a journaled model was called synchronously (invoke, stream, batch) inside an async "
    "run, where an AsyncRedisSaver cannot be waited for on its own event loop: in an "
    "async node call await model.ainvoke(...) or iterate model.astream(...)"
)


def refuse_sync_on_loop(saver: Any, advice: str = _TOOL_ADVICE) -> None:
    """Raise ``ConfigurationError`` (saying ``advice``) if a sync ledger call runs on
    ``saver``'s own event loop."""
    loop = getattr(saver, "loop", None)
    if loop is None:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return
    if running is loop:
        raise ConfigurationError(advice)


def refuse_task(func: Any) -> None:
    """Raise ``ConfigurationError`` if ``func`` is a Functional API ``@task``."""
    from langgraph import func as functional

    task_type = getattr(functional, "_TaskFunction", None)
    if task_type is not None and isinstance(func, task_type):
        raise ConfigurationError(
            f"@ledger.durable cannot wrap the @task {getattr(func, '__name__', func)!r}: "
            "a task call returns a future, not the result the ledger records. Put "
            "@ledger.durable under @task instead (@task, then @ledger.durable, then def): "
            "the call is recorded inside the task"
        )


def check_recordable(result: T) -> T:
    """``result``, unless it is a future (the ledger records results, not promises)."""
    if isinstance(result, (concurrent.futures.Future, asyncio.Future)):
        raise ConfigurationError(
            f"a ledger-recorded call returned a {type(result).__name__}, not a result: "
            "a durable function must return its result (call .result() on a Functional "
            "API task's future inside it, or put @ledger.durable under @task)"
        )
    return result
