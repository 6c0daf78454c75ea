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

from langgraph_durable.ledger.entries import LedgerEntry, Policy
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.plans import CallDecision
from langgraph_durable.ledger.policies import check_policy
from langgraph_durable.ledger.running import CallRunner
from langgraph_durable.ledger.sequences import CallSequence, LoadOnce, arun, run
from langgraph_durable.ledger.sites import Site, TaskContext, call_site
from langgraph_durable.ledger.wiring import refuse_task


class DurableCalls(CallRunner):
    """The ``durable`` decorator of ``ToolLedger``."""

    def policy(self, name: str, tool: Any = None) -> Policy:
        raise NotImplementedError

    def durable(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        policy: Policy | None = None,
    ) -> Any:
        """Make a side-effecting function durable when called inside a graph node.

        ``@ledger.durable`` or ``@ledger.durable(name=..., policy=...)``; sync and async
        functions. A call is keyed by its task and its position among the durable calls
        of that task (call them in a deterministic order), and by its name and
        arguments. Outside a checkpointed graph the function just runs. Inside a
        Functional API ``@task``, put it under ``@task``; over one it raises
        ``ConfigurationError``.
        """
        if policy is not None:
            check_policy(policy)

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            refuse_task(func)
            call_name = name or getattr(func, "__name__", "call")

            def effective_policy() -> Policy:
                return policy or self.policy(call_name)

            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    found = self._node_site(call_name, args, kwargs, effective_policy())
                    if found is None:
                        return await func(*args, **kwargs)
                    ledger, ctx = found
                    site, decision = await arun(
                        ledger.saver,
                        ledger._durable_sequence(ctx, call_name, args, kwargs, effective_policy()),
                    )
                    if decision.replay:
                        return decision.value
                    return await ledger._run_async(site, decision, lambda: func(*args, **kwargs))

                return async_wrapper

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                found = self._node_site(call_name, args, kwargs, effective_policy())
                if found is None:
                    return func(*args, **kwargs)
                ledger, ctx = found
                site, decision = run(
                    ledger.saver,
                    ledger._durable_sequence(ctx, call_name, args, kwargs, effective_policy()),
                )
                if decision.replay:
                    return decision.value
                return ledger._run_sync(site, decision, lambda: func(*args, **kwargs))

            return wrapper

        return decorate(fn) if fn is not None else decorate

    def _node_site(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy
    ) -> tuple[Any, TaskContext] | None:
        """The task attempt this call belongs to and the ledger (``_bound``) recording
        it, or None for a call that runs unrecorded."""
        if policy == "readonly":
            return None
        try:
            from langgraph.config import get_config

            config = get_config()
        except RuntimeError:
            return self._outside()
        ledger = self._bound(config)
        ctx = self._context(config, ledger._keys)
        if ctx is None:
            return self._outside()
        return ledger, ctx

    def _durable_sequence(
        self,
        ctx: TaskContext,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        policy: Policy,
    ) -> CallSequence[tuple[Site, CallDecision]]:
        """A ``@durable`` call's sequence (``sequences.py``): the task's entries read
        once, the call's place taken, its escalation asked inline, its intent begun."""
        yield LoadOnce(ctx, lambda: self._load(ctx, Lineage()))
        site = self._durable_site(ctx, name, args, kwargs)
        escalated = yield self._escalate_inline(ctx, site, policy)
        self._answer_inline(ctx, site, escalated)
        decision = yield self._begin(ctx, site, policy)
        return site, decision

    def _durable_site(
        self, ctx: TaskContext, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Site:
        """Where this durable call is recorded: at its order among the task's."""
        with ctx.lock:
            position = ctx.positions
            ctx.positions += 1
        return call_site(
            self._keys,
            ctx,
            name,
            {"args": list(args), "kwargs": kwargs},
            tool_call_id=None,
            position=position,
        )

    def _answer_inline(self, ctx: TaskContext, site: Site, entry: LedgerEntry | None) -> None:
        """A sequential call escalates at its own place in the node, so its
        ``interrupt()`` calls keep their order among the node's other interrupts."""
        if entry is not None:
            self._ask(ctx, [(slot, entry) for slot in entry.escalations])
