"""The ledger context: the settings and the shared state every ledger plan reads.

Owns what a ``ToolLedger``'s plans share, in one frozen object (the ledger's twin of the
saver's ``core/context.py``): the saver entries are recorded through, the policies and
``on_divergence``, the task attempts running now (``TaskAttempts``) and what this
process remembers of the answers it handed out (``memory.py``). Every plan and
integration is a function of it (``lctx: LedgerContext``, the first parameter); nothing
in it is reassigned after the ledger is built. A ledger without a saver of its own
records each task's calls through the saver that task runs with: ``bound`` gives the
context on that saver, sharing everything else.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.ledger.entries import Divergence, LedgerEntry, Policy
from langgraph_durable.ledger.memory import AnswerMemory
from langgraph_durable.ledger.sites import TaskContext, task_place
from langgraph_durable.ledger.wiring import run_saver

logger = logging.getLogger("langgraph_durable")
# Task attempts whose shared state is kept; an attempt evicted while still running would
# load its entries again, so this is far above the tasks one process runs at once.
_ATTEMPTS_KEPT = 10_000
_SCRATCHPAD = "__pregel_scratchpad"  # LangGraph's per-task-attempt state, in the config


class TaskAttempts:
    """The task attempts of one ledger, by LangGraph's per-attempt scratchpad."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: OrderedDict[int, TaskContext] = OrderedDict()
        self._warned_outside = False

    def of(self, config: RunnableConfig, keys: KeySchema) -> TaskContext | None:
        """The context of the task attempt whose config this is; None outside a
        checkpointed graph task (its calls run unrecorded)."""
        scratchpad = config.get("configurable", {}).get(_SCRATCHPAD)
        if scratchpad is None:
            return None
        with self._lock:
            ctx = self._attempts.get(id(scratchpad))
            if ctx is None or ctx.scratchpad is not scratchpad:
                place = task_place(keys, config)
                if place is None:
                    return None
                ctx = TaskContext(scratchpad, place)
                self._attempts[id(scratchpad)] = ctx
                while len(self._attempts) > _ATTEMPTS_KEPT:
                    self._attempts.popitem(last=False)
            return ctx

    def outside(self) -> None:
        """A ledger-wrapped call runs outside a checkpointed task: said once."""
        if not self._warned_outside:
            self._warned_outside = True
            logger.warning(
                "langgraph-durable: a ledger-wrapped call ran outside a checkpointed graph "
                "task (no thread_id); it is not recorded"
            )


@dataclass(frozen=True)
class LedgerContext:
    """The settings and shared state of one ledger's plans."""

    saver: Any  # RedisSaver or AsyncRedisSaver; None: each task's own (``bound``)
    policies: Mapping[str, Policy]
    default_policy: Policy
    on_divergence: Divergence
    use_tool_hints: bool
    attempts: TaskAttempts = field(default_factory=TaskAttempts)
    memory: AnswerMemory = field(default_factory=AnswerMemory)

    @property
    def core(self) -> Any:
        """The saver's plan context (serializer, keys, envelope, ttl)."""
        return self.recording_saver.core

    @property
    def keys(self) -> KeySchema:
        return cast(KeySchema, self.core.keys)

    @property
    def recording_saver(self) -> Any:
        """The saver entries are recorded through; ``ConfigurationError`` outside a
        task for a ledger without one."""
        if self.saver is None:
            raise ConfigurationError(
                "this ToolLedger has no saver of its own: it records through the saver "
                "its graph runs with, found in each call's run config. Outside a run "
                "(entries(), aentries()), pass one: ToolLedger(saver)"
            )
        return self.saver

    def policy(self, name: str, hint: Policy | None = None) -> Policy:
        """A call's policy: ``policies=``, else its tool's ``hint`` (when hints are
        used), else the default."""
        if name in self.policies:
            return self.policies[name]
        return (hint if self.use_tool_hints else None) or self.default_policy

    def policy_of(self, entry: LedgerEntry) -> Policy:
        """A recorded call's policy: the hint kept with it stands for its tool (the tool
        object is not at hand for the other calls of a task)."""
        return self.policy(entry.name, cast("Policy | None", entry.hint))


def bound(lctx: LedgerContext, config: RunnableConfig | None) -> LedgerContext:
    """``lctx``, or for a ledger without a saver of its own inside a graph task, the same
    context on the saver that task runs with (``ConfigurationError`` if it runs with no
    langgraph-durable saver). Outside a task the call runs unrecorded: no saver needed."""
    if lctx.saver is not None or config is None:
        return lctx
    if config.get("configurable", {}).get(_SCRATCHPAD) is None:
        return lctx
    return replace(lctx, saver=run_saver(config))


def task_of(
    lctx: LedgerContext, config: RunnableConfig | None, *, warn: bool = True
) -> tuple[LedgerContext, TaskContext] | None:
    """The context a call of the task whose config this is records through, and its task
    attempt; None for a call outside a checkpointed graph task (it runs unrecorded; with
    ``warn``, said once: a side effect outside a graph is worth a word, a model call not)."""
    recording = bound(lctx, config) if config is not None else lctx
    ctx = None
    if config is not None and recording.saver is not None:
        ctx = recording.attempts.of(config, recording.keys)
    if ctx is None:
        if warn:
            lctx.attempts.outside()
        return None
    return recording, ctx
