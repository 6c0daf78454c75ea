"""Executions: which recorded calls belong to the run that reaches a place again.

A recorded decision (a model answer, a tool call and its result) belongs to the
*execution* that made it, and is replayed only when that execution resumes after a
crash. LangGraph reaches the same place (namespace, superstep, node, path) again in
many other ways: a fork or a "regenerate" (time travel), a second fork of the same
checkpoint, a state edited with ``update_state``, a run after a rollback. Those are new
executions: their calls are new calls, with new idempotency keys, never answered from
another branch's record and never asked about as a divergence from it.

What identifies an execution:
  * It is named by the checkpoint its first recording task started from (the
    ``execution`` part of every ledger field; ``.N`` is added when an execution from the
    same checkpoint was rolled back). Every entry also records the id of the LangGraph
    task that wrote it, the checkpoint it started from, and its run id (LangGraph
    Server's ``run_id``, kept across the server's retries of a run; or one the caller set
    in ``configurable``/``metadata``).
  * A task attempt belongs to a recorded execution, checked in this order:
      1. one of its runs was rolled back (``delete_for_runs``): never;
      2. it started from a checkpoint one of the execution's task attempts started
         from (so LangGraph gave it the same task id): a crash resume, an interrupt
         answered (also in another run: LangGraph Server answers with a new run), a
         ``RetryPolicy`` retry, a server retry of a run whose checkpoint was saved. Yes;
      3. both have run ids: yes if they are the same run (the server retries a run with
         its id; another run is another execution);
      4. the task's run is a time travel (a fork, a regenerate): no;
      5. the recorded execution's starting checkpoint is still saved: no (a resume from it
         would have had the same task id: case 2). A fork's, an edited state's and every
         finished run's checkpoints are saved, so this settles them;
      6. its starting checkpoint was lost: a crash under ``durability="async"`` lost the
         checkpoints in flight, or ``"exit"`` saved none of the run's. The resumed run
         starts from an earlier checkpoint and reaches the place from a new one, with a
         new task id. A crashed execution saved nothing after its last record (async
         puts land in order; exit saves at the end): if the namespace holds a checkpoint
         created since (by the UUID6 time in its id), other than the one the task started
         from and those a run of this process saved (the resumed run re-creates the lost
         ones, ``saved_here.py``), the execution ended (an exit run saved its end) or
         another line went on from there (an ``update_state``, a new input): no. Else
         it continues the crashed execution if the call carries its line:
         a model call whose request (messages, their content and tool calls, ids left
         out) is the recorded one; a tool call from an AI message whose tool-call ids the
         execution recorded. A tool call from an AI message no journal produced, in an
         execution whose calls came from such messages too, continues it (the ledger
         cannot tell more; a call that differs is asked about, as before executions),
         and so do a durable call and an execution whose records tell nothing (written
         before executions were recorded, or damaged).
  * Among the executions that qualify, the newest is taken; none: a new execution.
Why each case gets the right answer: a crash resume under ``sync`` is case 2, under
``async`` case 2 for the steps whose checkpoint landed and 6 for the others (the model
step replays its answer, so the request and the tool-call ids are the recorded ones),
under ``exit`` case 6 (the same input sent again from the same checkpoint, nothing saved
since); a server retry is case 2 or 3, and a human's answer sent as a new run case 2.
A fork, a regenerate and a second fork are case 4 (and 5 once continued); an edited
question resubmitted or edited with ``update_state`` is case 4 or 5 (under ``exit``, 6:
the edit's checkpoint was saved after the execution's last record); a run after a
rollback is case 1 or 3.
What it cannot tell: after a crash that lost the checkpoint a call started from, in a
run without a run id, a new run that sends the same request again from the same
checkpoint continues the crashed execution (LangGraph itself cannot tell the two
apart); give runs ids (LangGraph Server does) to make it exact. Prompts that change on
every call (a timestamp) make case 6 ask the model again. Case 6 compares the clock of
the worker that recorded with the one that created a checkpoint: skewed clocks between
workers (seconds) can hide a checkpoint saved just after a crash. And a process cannot
tell its own runs' checkpoints apart, so an exit run's end is no news to the process
that ran it: the same request on an ``update_state`` branch there continues it. A fork
that crashed under ``exit`` saved nothing: sending the fork again is a new fork (case 4;
LangGraph forks again too), so its calls run again; fork under ``sync`` or ``async``
where tools have effects.
Pure functions; ``store.py`` reads what they need in the task's one ledger read.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_durable.ledger.entries import LedgerEntry

_CONF = "configurable"
_REPLAY_STATE = "__pregel_replay_state"  # set only on a run that travels back in time
_TASK_ID = "__pregel_task_id"
_RUNTIME = "__pregel_runtime"
_SCRATCHPAD = "__pregel_scratchpad"
_GREGORIAN_TO_UNIX = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01


@dataclass(frozen=True)
class Now:
    """What identifies the running task attempt's execution, from its config."""

    start: str  # the checkpoint the task started from ("" if LangGraph gave none)
    start_ns: str  # the namespace of that checkpoint
    task_id: str
    run_id: str | None
    forked: bool  # its run travelled back in time (a fork, a regenerate)
    attempt: int  # LangGraph's node attempt: > 1 when a RetryPolicy runs it again
    answered: int = 0  # answers it is given to its interrupts (Command(resume=...))


def now_of(config: RunnableConfig) -> Now:
    """The execution facts of the task whose config this is."""
    conf = config.get(_CONF, {})
    own_ns = str(conf.get("checkpoint_ns", ""))
    start_ns = own_ns.rpartition("|")[0]  # the graph the task runs in
    start = (conf.get("checkpoint_map") or {}).get(start_ns, "")
    run_id = conf.get("run_id") or config.get("metadata", {}).get("run_id")
    info = getattr(conf.get(_RUNTIME), "execution_info", None)
    attempt = getattr(info, "node_attempt", None)
    scratchpad = conf.get(_SCRATCHPAD)
    resume = getattr(scratchpad, "resume", None)
    null_resume = getattr(scratchpad, "get_null_resume", None)  # False: nothing consumed
    answered = len(resume) if isinstance(resume, list) else 0
    if answered == 0 and callable(null_resume) and null_resume(False) is not None:
        answered = 1
    return Now(
        start=str(start or ""),
        start_ns=start_ns,
        task_id=str(conf.get(_TASK_ID, "")),
        run_id=str(run_id) if run_id else None,
        forked=conf.get(_REPLAY_STATE) is not None,
        attempt=attempt if isinstance(attempt, int) else 1,
        answered=answered,
    )


@dataclass(frozen=True)
class Lineage:
    """What a call says of the line it is on (case 6): a model call's request digest,
    or a tool call's AI message (its tool-call ids, and whether a journal produced it)."""

    request: str | None = None
    call_ids: frozenset[str] = frozenset()
    journaled: bool = False


@dataclass(frozen=True)
class Execution:
    """The entries one execution recorded at a place, summed up."""

    name: str
    start: str
    starts: frozenset[str]  # every checkpoint its task attempts started from
    run_id: str | None
    void: bool
    newest: float  # when it last recorded something (wall clock)
    request: str | None  # its first model call's request digest
    call_ids: frozenset[str]
    journaled: bool  # its tool calls came from journaled AI messages
    legacy: bool  # recorded before executions were (no facts to check)


def executions(entries: Iterable[LedgerEntry], voided_runs: set[str]) -> list[Execution]:
    """The executions the entries of one place belong to."""
    groups: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.execution, []).append(entry)
    found = []
    for name, group in groups.items():
        run_ids = {e.run_id for e in group if e.run_id}
        models = sorted((e for e in group if e.model_call and e.request), key=lambda e: e.position)
        start = name.split(".", 1)[0]
        found.append(
            Execution(
                name=name,
                start=start,
                starts=frozenset({start} | {e.start for e in group if e.start}),
                run_id=min(run_ids) if run_ids else None,
                void=bool(run_ids & voided_runs),
                newest=max(max(e.started_at or 0.0, e.finished_at or 0.0) for e in group),
                request=models[0].request if models else None,
                call_ids=frozenset(e.tool_call_id for e in group if e.tool_call_id),
                journaled=any(e.journaled for e in group),
                legacy=name == "",
            )
        )
    return found


def choose(
    found: list[Execution],
    now: Now,
    saved_starts: set[str],
    lineage: Lineage,
    saved_since: float | None = None,
) -> Execution | None:
    """The recorded execution the task attempt ``now`` continues, or None (module rules).
    ``saved_since``: when the newest checkpoint of the namespace was created, leaving out
    the one ``now`` started from and those runs of this process saved (None: no other)."""
    live = [x for x in found if not x.void]  # 1
    same_start = [x for x in live if now.start in x.starts and not x.legacy]
    if same_start:  # 2
        return _newest(same_start)
    if now.run_id:  # 3
        same_run = [x for x in live if x.run_id == now.run_id]
        if same_run:
            return _newest(same_run)
        live = [x for x in live if x.run_id is None]
    if now.forked:  # 4
        return None
    lost = [x for x in live if x.legacy or x.start not in saved_starts]  # 5
    # 6: a checkpoint saved since it last recorded (its run's end under "exit", an
    # update_state, a new input) means it is over or another line went on from there.
    lost = [x for x in lost if saved_since is None or saved_since <= x.newest]
    return _newest([x for x in lost if _continues(x, lineage)])


def _continues(x: Execution, lineage: Lineage) -> bool:
    if x.legacy or (x.request is None and not x.call_ids):
        return True  # nothing recorded to tell (older or damaged records): as before
    if lineage.request is not None and x.request is not None:
        return lineage.request == x.request
    if lineage.call_ids and x.call_ids:
        if lineage.call_ids & x.call_ids:
            return True
        return not (lineage.journaled or x.journaled)
    return lineage.request is None and not lineage.call_ids  # a durable call: as before


def _newest(candidates: list[Execution]) -> Execution | None:
    return max(candidates, key=lambda x: (x.newest, x.name), default=None)


def new_name(found: list[Execution], now: Now) -> str:
    """The name of a new execution started by ``now``: its starting checkpoint, with a
    counter when one from that checkpoint was recorded already (and rolled back)."""
    base = now.start or now.task_id
    taken = {x.name for x in found}
    if base not in taken:
        return base
    n = 1
    while f"{base}.{n}" in taken:
        n += 1
    return f"{base}.{n}"


def request_digest(request: Any) -> str:
    """A digest of a model request: its messages' types, contents, tool calls and
    tool-call ids, message ids left out (fresh on every replay of an input), and any
    other input (a prompt's variables) as plain data."""
    text = json.dumps(_plain(request), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _plain(value: Any, depth: int = 0) -> Any:
    if depth > 20:  # a request is data a caller built: deep enough for any prompt
        return repr(value)
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, BaseMessage):
        return [
            value.type,
            _plain(value.content, depth + 1),
            [[c.get("name"), c.get("args"), c.get("id")] for c in getattr(value, "tool_calls", [])],
            getattr(value, "tool_call_id", None),
        ]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    to_messages = getattr(value, "to_messages", None)  # a PromptValue
    if callable(to_messages):
        return _plain(list(to_messages()), depth + 1)
    return repr(value)


def ai_messages(request: Any, depth: int = 0) -> list[AIMessage]:
    """The AI messages a model request holds (anywhere in its input)."""
    if depth > 20:
        return []
    if isinstance(request, AIMessage):
        return [request]
    if isinstance(request, Mapping):
        return [m for v in request.values() for m in ai_messages(v, depth + 1)]
    if isinstance(request, (list, tuple)):
        return [m for v in request for m in ai_messages(v, depth + 1)]
    to_messages = getattr(request, "to_messages", None)
    if callable(to_messages) and not isinstance(request, BaseMessage):
        return ai_messages(list(to_messages()), depth + 1)
    return []


def created_at(checkpoint_id: str) -> float | None:
    """When LangGraph created a checkpoint: its id is a UUID6, which holds the time."""
    try:
        value = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError):
        return None
    if value.version != 6:
        return None
    h = value.int
    ticks = ((h >> 96) << 28) | (((h >> 80) & 0xFFFF) << 12) | ((h >> 64) & 0x0FFF)
    return (ticks - _GREGORIAN_TO_UNIX) / 1e7
