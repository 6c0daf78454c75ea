"""The model-call journal: a replayed task gets the model's recorded answer, not a new one.

A model asked again after a crash rarely answers the same way (fresh tool-call ids,
other wording), so a resumed agent would propose calls that differ from the recorded
ones. Durable-execution systems journal the model call as well as the tool call; this
module does that with the ledger's own entries (same record, envelope and allowlist).

Owns where a model call is recorded and when its answer is replayed. Rules it keeps:
  * A model call is recorded at its *place*: its task (as every ledger call), the
    execution recording it (``executions.py``: its request's digest tells a crashed
    execution whose checkpoint was lost from a new one) and its order among the task's
    model calls, at ``MODEL_POSITION`` and up, under the name ``"model"``. Within its
    execution the request is no part of the match: a replayed call gets the recorded
    answer; one whose request holds another number of messages than the recorded one
    is logged at WARNING and still gets it.
  * It has no side effects, so it is written once, after the call (no intent). A crash
    during the call leaves nothing and the model is simply asked again; a damaged
    record is asked again too (and quarantined as it is replaced). Never escalated.
  * Only settled answers are replayed for good. An answer is *settled* once a call made
    from it was recorded (the intent of a tool call of its AI message, or of a durable
    call later in its node), or once another task's model request holds it (its task
    completed: a later step saw it), in that call's write. An unsettled answer is replayed once,
    to the first attempt after the one that recorded it (a crash right after the
    answer); if that attempt does not settle it either (its node raised again, or
    crashed again before acting on it), the next attempt asks the model again and
    records the new answer in its place. A node re-run by its ``RetryPolicy`` in the
    same process asks again at once: that attempt raised after the answer. Nothing was
    done with an unsettled answer, so asking again repeats no effect. An attempt given N
    answers to its node's interrupts (``Command(resume=...)``) may replay it N more times:
    the attempts before stopped at an ``interrupt()`` after the answer (a human saw it),
    not at an error.
  * An operator may drop a recorded answer (``ToolLedger.drop``): the next attempt asks
    again; who dropped what and why stays in the record.
  * A call that raises an error records nothing and gives its place back when no later
    call of the task has claimed one, so the answer of a retried call is the one
    replayed. A stream not read to the end records nothing and keeps its place: a
    replay asks again there (and stops reading it again), later calls keep theirs.
  * An answer's AI messages get an id if they have none (the same on every replay), and
    this process remembers which tool calls its answers held, so a tool call knows
    the answer it was made from (to settle it, and for ``executions.py``).
  * What is stored must load back under the saver's allowlist: a value naming a type
    the allowlist refuses (a structured response of your own class) raises
    ``ConfigurationError`` naming it before anything is written.
Plans over the ledger context and a model call's sequence (``journaled``); the
integrations (``integrations/model.py``, ``integrations/middleware.py``) drive them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_durable.core.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.serde import accepted_types, load
from langgraph_durable.ledger.calls import replay_note
from langgraph_durable.ledger.context import LedgerContext, task_of
from langgraph_durable.ledger.entries import MODEL_CALL, MODEL_POSITION, RESULT, LedgerEntry
from langgraph_durable.ledger.executions import Lineage, ai_messages, request_digest
from langgraph_durable.ledger.memory import answer_messages
from langgraph_durable.ledger.sequences import CallSequence, Invoke, Locked
from langgraph_durable.ledger.sites import Site, TaskContext, call_site, facts
from langgraph_durable.ledger.store import load as load_task
from langgraph_durable.ledger.store import write

logger = logging.getLogger("langgraph_durable")


@dataclass
class ModelCall:
    """One model call at its place: the recorded answer, if there is one to replay."""

    ctx: TaskContext
    position: int
    messages: int  # how many messages its request holds
    request: str  # its request's digest (executions.py)
    lctx: LedgerContext  # what records it (``context.bound``: the task's saver)
    seen: tuple[str, ...]  # ids of the AI messages its request holds
    site: Site | None = None  # set once the task's execution is known
    recorded: LedgerEntry | None = None  # its answer is ``recorded.result``
    previous: LedgerEntry | None = None  # what its place holds that is not replayed
    earlier: list[LedgerEntry] = field(default_factory=list)  # answers it settles


def model_call(lctx: LedgerContext, config: RunnableConfig, request: Any) -> ModelCall | None:
    """Claim the next model-call place of the running task; None outside a task."""
    found = task_of(lctx, config, warn=False)  # a model asked outside a graph: as it is
    if found is None:
        return None
    recording, ctx = found
    with ctx.lock:
        position = MODEL_POSITION + ctx.model_calls
        ctx.model_calls += 1
    seen = tuple(str(m.id) for m in ai_messages(request) if m.id)
    return ModelCall(ctx, position, _count(request), request_digest(request), recording, seen)


def look_up(call: ModelCall) -> Plan[ModelCall]:
    """Read the task's entries (once per task attempt) and find the answer to replay,
    if any (the module's rules). The caller holds the task's lock."""
    ctx, lctx = call.ctx, call.lctx
    if not ctx.loaded:
        yield from load_task(lctx, ctx, Lineage(request=call.request))
        ctx.loaded = True
    site = call.site = call_site(
        lctx.keys, ctx, MODEL_CALL, None, tool_call_id=None, position=call.position
    )
    entry = ctx.entries.get(site.field)
    call.previous = entry
    # Answers of other tasks this request holds: their tasks completed (a later step
    # saw them), so they are settled, in this call's write.
    call.earlier = [
        replace(e, settled=True)
        for e in lctx.memory.answers_in(site.thread_id, call.seen)
        if not e.settled and not e.field.startswith(site.task_prefix)
    ]
    if entry is None or entry.state != RESULT:
        return call
    if entry.request is not None and entry.request != call.request:
        # decide.py: the same execution but another request (a prompt that changed,
        # a state edited under it) is no replay; a model call has no side effects,
        # so the model is asked again and its new answer's calls are judged anew.
        logger.info(
            "langgraph-durable: thread %r, step %d: the model call recorded at this "
            "place had another request; asking the model again",
            site.thread_id,
            site.where.step,
        )
        return call
    now = ctx.place.now
    if not entry.settled:
        # Each interrupt answered since earns a replay: the attempt before stopped
        # at an interrupt() after the answer, not at an error.
        if (
            lctx.memory.raised_here(site.thread_id, site.field, now.task_id, now.attempt)
            or entry.replays > now.answered
        ):
            logger.info(
                "langgraph-durable: thread %r, step %d: the recorded model answer was "
                "not acted on by %s; asking the model again",
                site.thread_id,
                site.where.step,
                "the attempt that failed after it" if entry.replays < 1 else "its replays",
            )
            return call
        counted = replace(entry, replays=entry.replays + 1, **facts(ctx, entry))
        (entry,) = yield from write(lctx, site.thread_id, [counted], settle=call.earlier)
        lctx.memory.settled(site.thread_id, call.earlier)
        call.earlier = []
    if call.earlier:  # rare: only an answer this process handed out before a crash
        yield from write(lctx, site.thread_id, [], settle=call.earlier)
        lctx.memory.settled(site.thread_id, call.earlier)
        call.earlier = []
    if not entry.settled:
        ctx.unsettled.append(entry)
    ctx.entries[site.field] = entry
    call.recorded = entry
    lctx.memory.remember(site.thread_id, entry)
    yield replay_note(entry, "model")
    return call


def record(call: ModelCall, value: Any) -> Plan[None]:
    """Store ``value``, the model's answer, at the call's place (one write)."""
    lctx, site, ctx = call.lctx, call.site, call.ctx
    _check_loadable(lctx, value)
    assert site is not None  # look_up set it
    _name_messages(value, site.key)
    now = time.time()
    previous = call.previous
    entry = LedgerEntry(
        field=site.field,
        **vars(site.where),
        state=RESULT,
        idempotency_key=site.key,
        args={"messages": call.messages},
        attempts=1 + (previous.attempts if previous is not None else 0),
        result=value,
        started_at=now,
        finished_at=now,
        request=call.request,
        drops=previous.drops if previous is not None else (),
        **facts(ctx),
    )
    (entry,) = yield from write(
        lctx,
        site.thread_id,
        [entry],
        replacing=[previous] if previous else [],
        settle=call.earlier,
    )
    lctx.memory.settled(site.thread_id, call.earlier)
    ctx.entries[site.field] = entry
    ctx.unsettled.append(entry)
    lctx.memory.remember(site.thread_id, entry, attempt=ctx.place.now.attempt)


def _check_loadable(lctx: LedgerContext, value: Any) -> None:
    serde = lctx.core.serde
    try:
        load(serde, *serde.dumps_typed(value), accepted_types(serde))
    except RecordDamagedError as exc:
        raise ConfigurationError(
            f"the ledger cannot journal this model answer: {exc.reason}. Add its "
            "type to the saver's allowed_types= (e.g. the class of a structured "
            f"response), or journal no model calls (got a {type(value).__name__})"
        ) from exc


def give_back(call: ModelCall) -> None:
    """A call that raised gives its place back if no later call claimed one."""
    with call.ctx.lock:
        if call.ctx.model_calls == call.position - MODEL_POSITION + 1:
            call.ctx.model_calls -= 1


def journaled(
    call: ModelCall,
    invoke: Callable[[], Any],
    stored: Callable[[Any], Any] = lambda value: value,
    answer: Callable[[Any], Any] = lambda value: value,
) -> CallSequence[Any]:
    """A model call's sequence (``sequences.py``): its look-up, whole under the task's
    lock; then the recorded answer (as ``answer`` gives it back), or the model called
    (``invoke``) and what ``stored`` makes of its answer recorded. A call that raised
    records nothing and gives its place back."""
    found = yield from opened(call)
    if found.recorded is not None:
        return answer(found.recorded.result)
    try:
        value = yield Invoke(invoke)
        kept = stored(value)
    except Exception:
        give_back(call)
        raise
    yield record(call, kept)
    return value


def opened(call: ModelCall) -> CallSequence[ModelCall]:
    """A model call's look-up, whole under the task's lock (a stream's first step)."""
    found: ModelCall = yield Locked(call.ctx, look_up(call))
    return found


def _count(request: Any) -> int:
    """How many messages a model request holds (a list, a prompt value, a string)."""
    if isinstance(request, (list, tuple)):
        return len(request)
    to_messages = getattr(request, "to_messages", None)
    return len(to_messages()) if callable(to_messages) else 1


def _name_messages(value: Any, key: str) -> None:
    """Give the answer's AI messages an id if they have none: LangGraph would give each
    a random one, and a replay must put the same message in the state."""
    for i, message in enumerate(answer_messages(value)):
        if message.id is None:
            message.id = f"{key}-{i}"
