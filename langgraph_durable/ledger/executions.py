"""Executions: the facts that tell which recorded calls belong to the run at a place.

A recorded decision (a model answer, a tool call and its result) belongs to the
*execution* that made it. LangGraph reaches the same place (namespace, superstep, node,
path) again in many ways: a crash resume, an answered interrupt, a retry, a fork or a
"regenerate", ``update_state``, a run after a rollback, a sibling of a fan-out. Which of
them continues a recorded execution is decided by one table (``decide.py``); this module
gathers its facts:
  * ``now_of``: the task attempt's own, from its config (the checkpoint it started from,
    its task id, run id, time travel, its node attempt, the answers to its interrupts,
    the enclosing tasks of a subgraph);
  * ``executions``: a place's entries grouped by the execution named in their field
    (``.N`` added when an execution from the same checkpoint was rolled back), each
    with the starts, run, answers, AI messages and enclosing tasks its entries recorded;
  * ``facts_of`` and ``judge``: each recorded execution against the attempt, judged the
    same (its calls replay on the same request), unsure (asked about) or another.
A request digest (``request_digest``) leaves message ids out: they are fresh on every
replay of an input. Pure functions; ``store.py`` reads what they need in the task's one
ledger read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_durable.ledger.decide import Answer, Facts, execution_of
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
    resumes: tuple[str, ...] = ()  # digests of those answers, in order
    # Per enclosing graph level: the checkpoint the parent task started from and that
    # task's own namespace segment (name:task id). Tasks of one superstep that share a
    # level's checkpoint but not its task are siblings (a fan-out): decide.py row 2.
    parents: tuple[tuple[str, str], ...] = ()


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
    answers = list(resume) if isinstance(resume, list) else []
    pending = null_resume(False) if callable(null_resume) else None
    answered = len(answers)
    if answered == 0 and pending is not None:
        answered = 1
    if pending is not None:
        answers.append(pending)
    segments = own_ns.split("|") if own_ns else []
    cmap = conf.get("checkpoint_map") or {}
    parents = tuple(
        (str(cmap.get("|".join(segments[:k]), "")), segments[k]) for k in range(len(segments) - 1)
    )
    return Now(
        start=str(start or ""),
        start_ns=start_ns,
        task_id=str(conf.get(_TASK_ID, "")),
        run_id=str(run_id) if run_id else None,
        forked=conf.get(_REPLAY_STATE) is not None,
        attempt=attempt if isinstance(attempt, int) else 1,
        answered=answered,
        resumes=tuple(value_digest(a) for a in answers),
        parents=parents,
    )


@dataclass(frozen=True)
class Lineage:
    """What a call says of the decision it comes from: a model call's request digest, or
    a tool call's AI message (its id and tool-call ids)."""

    request: str | None = None
    call_ids: frozenset[str] = frozenset()
    journaled: bool = False
    message_id: str | None = None  # the id of the AI message a tool call comes from
    # Whether the task's answers to interrupts steer its calls (a node's model and
    # durable calls); a ToolNode task's are the ledger's own questions, its calls come
    # from the AI message (and LangGraph may lose a failed attempt's answers).
    steered: bool = True


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
    message_ids: frozenset[str] = frozenset()  # the AI messages its tool calls came from
    resumes: tuple[str, ...] = ()  # the answers its attempts were given (the longest)
    parents: tuple[tuple[str, str], ...] = ()  # its task's enclosing tasks (Now.parents)


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
                message_ids=frozenset(e.message_id for e in group if e.message_id),
                resumes=max((e.resumes for e in group), key=len, default=()),
                parents=next((e.parents for e in group if e.parents), ()),
            )
        )
    return found


@dataclass(frozen=True)
class Judged:
    """The executions recorded at a place, as decide.py sees them for one task attempt."""

    same: Execution | None  # the one it continues (its calls replay on the same request)
    unsure: list[Execution]  # those it may continue: their calls are asked about
    facts: dict[str, Facts]  # the facts of every execution, by name


def facts_of(
    x: Execution,
    now: Now,
    saved_starts: set[str],
    lineage: Lineage,
) -> Facts:
    """The proven facts of recorded execution ``x`` against the task attempt ``now``."""
    return Facts(
        rolled_back=x.void,
        sibling=_siblings(x.parents, now.parents),
        forked=now.forked,
        same_start=bool(now.start) and now.start in x.starts and not x.legacy,
        resume_changed=lineage.steered and _changed(x.resumes, now.resumes),
        same_decision=lineage.message_id is not None and lineage.message_id in x.message_ids,
        recorded_run=x.run_id,
        run=now.run_id,
        start_saved=not x.legacy and x.start in saved_starts,
    )


def judge(
    found: list[Execution],
    now: Now,
    saved_starts: set[str],
    lineage: Lineage,
) -> Judged:
    """Which recorded executions the task attempt ``now`` continues, may continue, or
    provably does not (decide.py, with the request taken as equal: each call compares
    its own)."""
    facts = {x.name: facts_of(x, now, saved_starts, lineage) for x in found}
    answers = {x.name: execution_of(facts[x.name]) for x in found}
    same = [x for x in found if answers[x.name] is Answer.REPLAY]
    unsure = [x for x in found if answers[x.name] is Answer.ASK]
    return Judged(_newest(same), unsure, facts)


def _siblings(recorded: tuple[tuple[str, str], ...], now: tuple[tuple[str, str], ...]) -> bool:
    """Whether two tasks run under different tasks of one enclosing superstep: at the
    first level where they part, both enclosing tasks started from one checkpoint."""
    for (cp_a, task_a), (cp_b, task_b) in zip(recorded, now):
        if cp_a != cp_b or not cp_a:
            return False
        if task_a != task_b:
            return True
    return False


def _changed(recorded: tuple[str, ...], now: tuple[str, ...]) -> bool:
    """Whether the answers now given differ from those recorded (one being the start of
    the other is the same answers, some still to come)."""
    return any(a != b for a, b in zip(recorded, now))


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


def value_digest(value: Any) -> str:
    """A digest of plain data (an answer to an interrupt)."""
    text = json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
