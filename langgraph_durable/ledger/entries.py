"""Ledger entries: what one recorded call holds, its states, and its stored record.

Owns ``LedgerEntry`` and its states (``intent`` before the call, then ``result``,
``error`` or ``interrupted``; ``diverged`` for a call that differs from the one recorded
at its place and waits for a human, never run; ``damaged`` is never stored, it is how a
record that does not verify reads), the policies a tool may have, how a human answers an
escalation (``EscalationAnswer``, ``DivergenceAnswer``), and the entry's record: msgpack
in the integrity envelope, bound to its thread and field, its result through the saver's
serializer and allowlist.
Rules: nothing in a record is used before it verifies; an unreadable record is an
unknown outcome, never a missing one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as default
from typing import Any, Literal

import msgpack
from pydantic import BaseModel, model_validator

from langgraph_durable.core import codec
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.heads import REPLAYED, replayed
from langgraph_durable.core.keys import LEDGER_RECORD, KeySchema

Policy = Literal["escalate", "retry", "fail", "readonly"]
POLICIES: tuple[str, ...] = ("escalate", "retry", "fail", "readonly")
Divergence = Literal["escalate", "raise", "new_call"]
DIVERGENCES: tuple[str, ...] = ("escalate", "raise", "new_call")

# Entry states. "damaged" is never stored: it is how an unverifiable record reads.
INTENT, RESULT, ERROR, INTERRUPTED, DAMAGED = "intent", "result", "error", "interrupted", "damaged"
DIVERGED = "diverged"
DROPPED = "dropped"  # a model answer an operator dropped: asked again at its place
_UNKNOWN_STATES = (INTENT, DAMAGED)
_FORMAT = 1
# Model calls (journal.py) are recorded at this position plus their order in the task,
# far above any tool call's or durable call's, so no divergence check ever pairs them.
MODEL_POSITION = 5_000_000
MODEL_CALL = "model"  # the name of every journaled model call


class _Answer(BaseModel):
    action: Literal["retry", "skip", "fail"]
    result: Any = None


class DivergenceAnswer(_Answer):
    """How a human resolves a call that differs from the call recorded at its place, when
    that recorded call has a result (otherwise the answer is an ``EscalationAnswer``).

    ``skip``: the recorded effect stands, the new call is not run and returns ``result``
    if given, else the recorded call's result; ``retry`` runs the new call (its own
    idempotency key); ``fail`` raises ``ToolCallDivergedError`` in the graph.
    """


class EscalationAnswer(_Answer):
    """How a human resolves a call of unknown outcome (the ``Command(resume=...)`` value).

    ``retry`` runs the tool again with the same idempotency key; ``skip`` records
    ``result`` as the tool's output (it did take effect) without running it; ``fail``
    raises ``ToolOutcomeUnknownError`` in the graph. A divergence whose recorded call has
    no result is answered the same way (``skip`` needs the output; ``retry`` runs the new
    call; ``fail`` raises ``ToolCallDivergedError``).
    """

    @model_validator(mode="after")
    def _skip_needs_result(self) -> EscalationAnswer:
        if self.action == "skip" and "result" not in self.model_fields_set:
            raise ValueError('{"action": "skip"} needs the tool\'s output as "result"')
        return self


@dataclass(frozen=True)
class Decision:
    """An operator's answer to one escalation, recorded outside the graph (``resolve``):
    the next replay applies it instead of raising that escalation's ``interrupt()``."""

    action: str  # retry | skip | fail
    result: Any = None  # skip: the tool's output
    reason: str | None = None
    by: str | None = None
    at: float | None = None

    def answer(self) -> dict[str, Any]:
        """The answer it stands for, as ``Command(resume=...)`` would give it (a ``skip``
        without a result keeps a diverged call's recorded one)."""
        if self.action == "skip" and self.result is not None:
            return {"action": "skip", "result": self.result}
        return {"action": self.action}


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded call, as ``ToolLedger.entries`` reports it."""

    field: str
    checkpoint_ns: str
    step: int
    task: str
    position: int
    name: str
    args_hash: str
    state: str  # intent | result | error | interrupted | diverged | damaged
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    args: Any = None
    attempts: int = 0
    # Escalations: every interrupt this call raised, numbered in the order the task
    # raises them (replays raise them all again in that order, so LangGraph matches
    # each stored answer to the same question), and the one whose answer applies to
    # the current attempt (None once acted on: an attempt that is lost again asks anew).
    escalations: tuple[int, ...] = ()
    escalation: int | None = None
    resolution: str | None = None  # how a human answered its escalation
    result: Any = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    damage: str | None = None  # why the record did not verify
    diverged_from: str | None = None  # the field of the recorded call this one replaced
    hint: str | None = None  # the policy the tool's own metadata gave it (policies.py)
    # The execution that recorded it (executions.py): the name is in the field.
    execution: str = ""
    task_id: str | None = None  # LangGraph's id of the task attempt that wrote it
    start: str | None = None  # the checkpoint that task attempt started from
    run_id: str | None = None
    request: str | None = None  # a model call: its request's digest
    journaled: bool = False  # a tool call: its AI message came from the model journal
    message_id: str | None = None  # a tool call: the id of the AI message it came from
    resumes: tuple[str, ...] = ()  # digests of the answers its task attempt was given
    parents: tuple[tuple[str, str], ...] = ()  # the enclosing tasks (executions.Now)
    # A model answer (journal.py): settled once a call made from it was recorded;
    # replays counts the attempts it was handed to while unsettled.
    settled: bool = False
    replays: int = 0
    rolled_back: bool = False  # its run was rolled back (rollback.py); not stored here
    # The SHA-1 of the record this entry was read from or written as (not stored): a
    # settle writes over that record only (ledger_settle.lua).
    seen: str | None = default(default=None, compare=False)
    # The process that wrote the record (host:pid): who went on after a crash (timeline).
    worker: str | None = default(default=None, compare=False)
    # Operators' drops of recorded answers at this field: (by, reason, at, what), oldest
    # first; the newest is in force while ``state`` is DROPPED.
    drops: tuple[tuple[str | None, str | None, float, str], ...] = ()
    # Operators' answers (``ToolLedger.resolve``) by escalation number: a slot decided
    # here never raises its interrupt() again, so LangGraph's answers keep their order.
    decisions: Mapping[int, Decision] = default(default_factory=dict, hash=False, compare=False)

    @property
    def outcome_unknown(self) -> bool:
        return self.state in _UNKNOWN_STATES

    @property
    def model_call(self) -> bool:
        """Whether this entry journals a model call (``journal.py``), not a tool call."""
        return self.position >= MODEL_POSITION


def seal_entry(ctx: PlanContext, thread_id: str, entry: LedgerEntry) -> bytes:
    """The record of ``entry``: msgpack in the integrity envelope, bound to its field."""
    return sealed_entry(ctx, thread_id, entry)[0]


def sealed_entry(ctx: PlanContext, thread_id: str, entry: LedgerEntry) -> tuple[bytes, bytes]:
    """The record of ``entry`` and its body (what its signed mark names: heads.py)."""
    serde = ctx.serde
    body = {
        "v": _FORMAT,
        "state": entry.state,
        "key": entry.idempotency_key,
        "call_id": entry.tool_call_id,
        "args": entry.args,
        "attempts": entry.attempts,
        "escalation": entry.escalation,
        "escalations": list(entry.escalations),
        "resolution": entry.resolution,
        "result": list(serde.dumps_typed(entry.result)) if entry.state == RESULT else None,
        "error": entry.error,
        "started": entry.started_at,
        "finished": entry.finished_at,
        "from": entry.diverged_from,
        "hint": entry.hint,
        "w": entry.worker,
        "x": [entry.task_id, entry.run_id, entry.request, entry.journaled, entry.start],
        # decide.py's facts, apart from "x" so that earlier releases still read the record
        "y": [entry.message_id, list(entry.resumes), [list(p) for p in entry.parents]],
        "m": [entry.settled, entry.replays],
        "drops": [list(d) for d in entry.drops],
        "decisions": [
            [slot, d.action, list(serde.dumps_typed(d.result)), d.reason, d.by, d.at]
            for slot, d in sorted(entry.decisions.items())
        ],
    }
    identity = KeySchema.identity(LEDGER_RECORD, thread_id, entry.field)
    packed = msgpack.packb(body, use_bin_type=True)
    return ctx.envelope.seal(identity, packed), packed


def open_entry(
    ctx: PlanContext,
    thread_id: str,
    raw_field: bytes | str,
    record: bytes | None,
    mark: bytes | None = None,
) -> LedgerEntry:
    """The entry a record holds, verified; one that does not verify or decode, or that
    its signed ``mark`` names no longer (an older record written back: heads.py), reads
    as ``DAMAGED`` with the reason (its field still says where the call was)."""
    field = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
    base = LedgerEntry(field=field, **vars(ctx.keys.parse_ledger_field(field)), state=DAMAGED)
    if record:
        base = replace(base, seen=hashlib.sha1(record).hexdigest())
    try:
        raw = ctx.envelope.open(KeySchema.identity(LEDGER_RECORD, thread_id, field), record)
        if replayed(ctx.envelope, thread_id, field, raw, mark):
            return replace(base, damage=REPLAYED)
        body = msgpack.unpackb(raw, raw=False)
        if not isinstance(body, dict) or body.get("v") != _FORMAT:
            raise RecordDamagedError("undecodable body")
        result = body["result"]
        return replace(
            base,
            state=_typed(body["state"], str),
            idempotency_key=_typed(body["key"], str, None),
            tool_call_id=_typed(body["call_id"], str, None),
            args=body["args"],
            attempts=_typed(body["attempts"], int),
            escalation=_typed(body["escalation"], int, None),
            escalations=tuple(_typed(slot, int) for slot in body["escalations"]),
            resolution=_typed(body["resolution"], str, None),
            result=codec.load_value(ctx, *result) if result is not None else None,
            error=_typed(body["error"], str, None),
            started_at=_typed(body["started"], float, int, None),
            finished_at=_typed(body["finished"], float, int, None),
            diverged_from=body.get("from"),  # absent from records of earlier versions
            hint=body.get("hint"),
            worker=_typed(body.get("w"), str, None),  # absent from earlier releases' records
            **_execution_facts(body),
            decisions={
                _typed(slot, int): Decision(
                    _typed(action, str),
                    codec.load_value(ctx, *result),
                    _typed(reason, str, None),
                    _typed(by, str, None),
                    _typed(at, float, int, None),
                )
                for slot, action, result, reason, by, at in body.get("decisions") or ()
            },
        )
    except RecordDamagedError as exc:
        return replace(base, damage=exc.reason)
    except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        return replace(base, damage=f"undecodable body ({type(exc).__name__})")


def _typed(value: Any, *kinds: type | None) -> Any:
    """``value`` if it is one of ``kinds`` (None: None itself; never a bool for int):
    stored bytes say what they like, and what they say is shown and compared as is."""
    if value is None and None in kinds:
        return value
    if isinstance(value, bool) or not isinstance(value, tuple(k for k in kinds if k)):
        raise TypeError(f"a ledger field of type {type(value).__name__}")
    return value


def _execution_facts(body: dict[str, Any]) -> dict[str, Any]:
    """The execution facts of a record body (absent from records of earlier versions)."""
    task_id, run_id, request, journaled, start = body.get("x") or (None,) * 5
    message_id, resumes, parents = body.get("y") or (None, (), ())
    settled, replays = body.get("m") or (False, 0)
    drops = tuple(
        (by, reason, float(at), str(what)) for by, reason, at, what in body.get("drops") or ()
    )
    return {
        "task_id": _text(task_id),
        "start": _text(start),
        "run_id": _text(run_id),
        "request": _text(request),
        "journaled": journaled is True,
        "message_id": _text(message_id),
        "resumes": tuple(_typed(r, str) for r in resumes),
        "parents": tuple((_typed(c, str), _typed(t, str)) for c, t in parents),
        "settled": settled is True,
        "replays": replays if isinstance(replays, int) else 0,
        "drops": tuple((_text(by), _text(r), at, what) for by, r, at, what in drops),
    }


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected text, got {type(value).__name__}")


def next_slot(entries: Iterable[LedgerEntry]) -> int:
    return max((slot for e in entries for slot in e.escalations), default=-1) + 1


def escalation_value(thread_id: str, entry: LedgerEntry) -> dict[str, Any]:
    return {
        "type": "tool_outcome_unknown",
        "tool_call_id": entry.tool_call_id,
        "name": entry.name,
        "args": entry.args,
        "idempotency_key": entry.idempotency_key,
        "thread_id": thread_id,
        "checkpoint_ns": entry.checkpoint_ns,
        "step": entry.step,
        "attempts": entry.attempts,
        "started_at": entry.started_at,
        "reason": unknown_reason(entry),
        "answers": ["retry", "skip", "fail"],
    }


def unknown_reason(entry: LedgerEntry) -> str:
    if entry.damage:
        return f"its ledger record is damaged ({entry.damage})"
    return "the process stopped between its intent and its result"


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"[:2000]
