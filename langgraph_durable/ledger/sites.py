"""Where a call is recorded: its site (ledger field), its task attempt, its idempotency key.

Owns the call's address in the ledger (``keys.py`` spells the field): checkpoint
namespace without the running task's own id, superstep, task (node and path) (its
*place*), the execution that recorded it (``executions.py``), position (its index in
the AI message, or its order among a node's durable calls), tool name and a hash of the
canonical arguments. Rules it keeps:
  * Every part is stable when the same execution resumes, also when
    ``durability="async"`` lost the checkpoint the task started from; the provider's
    ``tool_call_id`` is no part of it (providers reuse ids such as ``call_0``).
  * The idempotency key is a hash of thread and field: the same for a call across
    crashes, replays and retries, different for every new call (another execution's
    call at the same place is a new call).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from langgraph_durable.core.keys import KeySchema, LedgerField
from langgraph_durable.ledger.decide import Facts
from langgraph_durable.ledger.entries import DivergenceAnswer, EscalationAnswer, LedgerEntry
from langgraph_durable.ledger.executions import Now, now_of

_NS_SEP, _NS_END = "|", ":"
FALLBACK_POSITION = 1_000_000  # positions of calls not found in an AI message start here

current_key: ContextVar[str | None] = ContextVar("langgraph_durable_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """The idempotency key of the ledger-recorded call running now, else ``None``.

    The same for a call across crashes, replays and retries; different for every new
    call. Hand it to external APIs that deduplicate (payments, e-mail, tickets).
    """
    return current_key.get()


@dataclass(frozen=True)
class _Place:
    """Where a task's calls are recorded: its thread, namespace, step and task, and the
    facts of its execution (executions.py)."""

    thread_id: str
    checkpoint_ns: str
    step: int
    task: str
    prefix: str  # every ledger field of the task starts with it
    start_member: str  # checkpoint members of the namespace it started in begin so
    now: Now


@dataclass(frozen=True)
class Site:
    """Where one call is recorded, and what it is."""

    thread_id: str
    where: LedgerField  # the parts of ``field``
    task_prefix: str
    field: str
    ordered: bool  # position is the call's index in its AI message or its node
    args: Any
    key: str
    tool_call_id: str | None

    @property
    def name(self) -> str:
        return self.where.name

    @property
    def position(self) -> int:
        return self.where.position


class TaskContext:
    """What the calls of one task attempt share: one read of the task's entries (those of
    the execution it belongs to), the answers to its escalations, and its calls' order."""

    def __init__(self, scratchpad: object, place: _Place) -> None:
        self.scratchpad = scratchpad  # held, so its id() is not reused while we are
        self.place = place
        self.lock = threading.Lock()
        self.alock = asyncio.Lock()  # binds to a loop on first use
        self.loaded = False
        self.execution = ""  # decided by the load (executions.py)
        self.entries: dict[str, LedgerEntry] = {}
        self.ledger_damaged = False
        self.answers: dict[str, EscalationAnswer | DivergenceAnswer] = {}
        self.failure: BaseException | None = None  # raised by every call of the attempt
        self.positions = 0
        self.model_calls = 0  # model calls claimed so far (journal.py)
        self.claimed: dict[tuple[str, str, str], int] = {}
        self.unsettled: list[LedgerEntry] = []  # model answers the next intent settles
        # Entries of executions it may continue (decide.py: asked about), by field, and
        # the facts of every recorded execution by name.
        self.suspects: dict[str, LedgerEntry] = {}
        self.facts: dict[str, Facts] = {}
        self.borrowed: dict[str, str] = {}  # field -> a suspect's key a retry runs under
        self.message_id: str | None = None  # the AI message its tool calls come from
        self.lineage: Any = None  # what its load judged executions by (executions.Lineage)

    def recorded(self, field: str) -> LedgerEntry | None:
        """The entry of ``field`` in its execution or among the suspects."""
        return self.entries.get(field) or self.suspects.get(field)


def task_place(keys: KeySchema, config: RunnableConfig) -> _Place | None:
    """Where the calls of the task whose config this is are recorded, or None outside a
    checkpointed graph task."""
    conf = config.get("configurable", {})
    meta = config.get("metadata", {})
    thread_id = conf.get("thread_id")
    step = meta.get("langgraph_step")
    if thread_id is None or step is None:
        return None
    ns = stable_namespace(str(conf.get("checkpoint_ns", "")), conf.get("checkpoint_map") or {})
    task = json.dumps(
        [meta.get("langgraph_node"), list(meta.get("langgraph_path") or ())],
        default=str,
        separators=(",", ":"),
    )
    now = now_of(config)
    return _Place(
        thread_id=str(thread_id),
        checkpoint_ns=ns,
        step=int(step),
        task=task,
        prefix=keys.ledger_task(ns, int(step), task),
        start_member=keys.checkpoint_member(now.start_ns, ""),
        now=now,
    )


def call_site(
    keys: KeySchema,
    ctx: TaskContext,
    name: str,
    args: Any,
    *,
    tool_call_id: str | None,
    position: int | None,
) -> Site:
    """Where this call of the task attempt ``ctx`` is recorded (its execution decided)."""
    place = ctx.place
    args, args_hash = canonical_args(args)
    ordered = position is not None
    if position is None:
        with ctx.lock:
            claim = (str(tool_call_id), name, args_hash)
            position = FALLBACK_POSITION + ctx.claimed.get(claim, 0)
            ctx.claimed[claim] = ctx.claimed.get(claim, 0) + 1
    field = keys.ledger_field(place.prefix, ctx.execution, position, name, args_hash)
    where = LedgerField(
        place.checkpoint_ns, place.step, place.task, position, name, args_hash, ctx.execution
    )
    return Site(
        thread_id=place.thread_id,
        where=where,
        task_prefix=place.prefix,
        field=field,
        ordered=ordered,
        args=args,
        key=site_idempotency_key(place.thread_id, field),
        tool_call_id=tool_call_id,
    )


def facts(ctx: TaskContext, entry: LedgerEntry | None = None) -> dict[str, Any]:
    """The execution facts an entry written by the task attempt ``ctx`` records: its task
    and starting checkpoint (the newest attempt's, so a human's answer sent from the
    checkpoint it stopped at finds its execution) and its run (the first run's)."""
    now = ctx.place.now
    run_id = entry.run_id if entry is not None and entry.run_id else now.run_id
    return {
        "task_id": now.task_id or None,
        "start": now.start or None,
        "run_id": run_id,
        "resumes": now.resumes,
        "parents": now.parents,
        "message_id": ctx.message_id,
    }


def ordered_positions(calls: list[dict[str, Any]]) -> list[int]:
    """The indices of an AI message's calls that are recorded at their index: those no
    other call of the message duplicates (as ``position_in_message`` decides)."""
    same = [(c.get("id"), c.get("name"), c.get("args")) for c in calls]
    return [i for i, c in enumerate(same) if same.count(c) == 1]


def _canonical(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


def canonical_args(args: Any) -> tuple[Any, str]:
    """Arguments as plain JSON data (what the ledger stores) and their hash."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=_canonical)
    return json.loads(text), hashlib.sha256(text.encode()).hexdigest()[:32]


def site_idempotency_key(thread_id: str, field: str) -> str:
    digest = hashlib.sha256(thread_id.encode() + b"\x00" + field.encode()).hexdigest()
    return f"lgd-{digest[:32]}"


def stable_namespace(ns: str, checkpoint_map: Mapping[str, Any]) -> str:
    """The task's namespace without the task ids in it, which ``exit`` (or a lost async
    checkpoint) does not keep: every enclosing task is named by its node and the step of
    the checkpoint it started from (the clock sequence LangGraph gives a checkpoint id is
    its step), so a subgraph at any depth has the same place after a crash. Where that
    step cannot be read (an id that is no UUID6), the task id stays."""
    segments = ns.split(_NS_SEP) if ns else []
    stable = []
    for k, segment in enumerate(segments):
        name, _, task_id = segment.partition(_NS_END)
        if k == len(segments) - 1 or not task_id:
            stable.append(name)
            continue
        step = checkpoint_step(str(checkpoint_map.get(_NS_SEP.join(segments[:k]), "")))
        stable.append(f"{name}@{step}" if step is not None else segment)
    return _NS_SEP.join(stable)


def checkpoint_step(checkpoint_id: str) -> int | None:
    """The step LangGraph wrote into a checkpoint id (``uuid6(clock_seq=step)``), or None."""
    try:
        value = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError):
        return None
    if value.version != 6:
        return None
    sequence = (value.int >> 48) & 0x3FFF
    return sequence - 0x4000 if sequence >= 0x2000 else sequence  # -1: an input checkpoint


def _messages_of(state: Any) -> list[Any]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        messages = state.get("messages")
    else:
        messages = getattr(state, "messages", None)
    return messages if isinstance(messages, list) else []


def position_in_message(
    state: Any, call: Mapping[str, Any]
) -> tuple[int | None, list[dict[str, Any]], str | None]:
    """The call's index in the newest AI message that holds it (if exactly one of its
    calls matches; identical duplicates fall back to the claim order), its calls (empty
    if no AI message holds it), and that message's id."""
    for message in reversed(_messages_of(state)):
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        calls = cast(list[dict[str, Any]], message.tool_calls)
        matches = [
            i
            for i, tc in enumerate(calls)
            if tc.get("id") == call.get("id")
            and tc.get("name") == call.get("name")
            and tc.get("args") == call.get("args")
        ]
        if matches:
            position = matches[0] if len(matches) == 1 else None
            return position, calls, str(message.id) if message.id else None
    return None, [], None


def call_at(calls: list[dict[str, Any]], entry: LedgerEntry) -> dict[str, Any] | None:
    """The AI message's call recorded in ``entry``'s field, if it is that call."""
    if entry.position < len(calls):
        call = calls[entry.position]
        if (
            call.get("name") == entry.name
            and canonical_args(call.get("args", {}))[1] == entry.args_hash
        ):
            return call
    return None
