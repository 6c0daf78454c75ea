"""Driving plans by hand: no Redis, no shell. A test answers each operation a plan yields
from a script of replies and counts the round trips from what the plan yielded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from langgraph_durable.core import codec
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.ops import Batch, Command, Note, Plan, Script
from langgraph_durable.core.saver_core import SaverCore
from langgraph_durable.core.serde import default_serde

PREFIX = "unit"
THREAD = "t"


def make_core(*, signing_key: bytes | None = None, **options: Any) -> SaverCore:
    return SaverCore(
        serde=default_serde(),
        keys=KeySchema(PREFIX),
        envelope=Envelope(signing_key, PREFIX),
        ttl=options.pop("ttl", None),
        **options,
    )


def name_of(op: Any) -> str:
    """What an operation is, for a script of replies: a script's name, a command's verb,
    or "batch:" and the names of what it holds."""
    if isinstance(op, Script):
        return op.name
    if isinstance(op, Command):
        return str(op.args[0])
    if isinstance(op, Batch):
        return "batch:" + ",".join(
            name_of(c) if isinstance(c, Script) else str(c[0]) for c in op.commands
        )
    return type(op).__name__


def drive(
    plan: Plan[Any], *script: tuple[str, Any | Callable[[Any], Any]]
) -> tuple[Any, list[Any]]:
    """Run ``plan``, answering its operations in order from ``script`` (what each must be,
    and its reply, or a function of the operation that returns it). Returns the plan's
    result and every operation it yielded; a plan that yields something else, or more
    or fewer operations than scripted, fails the test. Telemetry notes are not Redis
    operations: ``drive_noting`` returns them too."""
    result, ops, _ = drive_noting(plan, *script)
    return result, ops


def drive_noting(
    plan: Plan[Any], *script: tuple[str, Any | Callable[[Any], Any]]
) -> tuple[Any, list[Any], list[Note]]:
    """``drive``, and the notes the plan yielded for telemetry, in order."""
    ops: list[Any] = []
    notes: list[Note] = []
    replies = list(script)
    reply: Any = None
    while True:
        try:
            op = plan.send(reply)
        except StopIteration as stop:
            assert not replies, f"the plan ended with {[n for n, _ in replies]} still scripted"
            return stop.value, ops, notes
        if isinstance(op, Note):
            notes.append(op)
            reply = None
            continue
        ops.append(op)
        assert replies, f"unscripted operation {name_of(op)}"
        expected, answer = replies.pop(0)
        assert name_of(op) == expected, f"expected {expected}, the plan yielded {name_of(op)}"
        reply = answer(op) if callable(answer) else answer


class Thread:
    """Records of one thread as the read scripts return them, sealed by ``core``."""

    def __init__(self, core: SaverCore, thread_id: str = THREAD) -> None:
        self.core = core
        self.thread_id = thread_id
        self.records: dict[str, bytes] = {}  # checkpoint member -> record
        self.values: dict[str, bytes] = {}  # blob field -> record
        self.ids: list[str] = []

    def checkpoint(self, step: int, values: dict[str, Any], parent: str | None = None) -> str:
        """A stored checkpoint whose every channel changed; returns its id."""
        checkpoint: Checkpoint = empty_checkpoint()
        checkpoint["id"] = f"1ef{step:05d}-0000-6000-8000-000000000000"
        checkpoint["channel_versions"] = {c: f"{step:032}.0" for c in values}
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        serde = self.core.serde
        member = self.core.keys.checkpoint_member("", checkpoint["id"])
        body = [parent, *serde.dumps_typed(stored), *serde.dumps_typed({"step": step})]
        self.records[member] = codec.seal(self.core, "cp", self.thread_id, member, body)
        for channel, value in values.items():
            field = self.core.keys.blob_field("", channel, checkpoint["channel_versions"][channel])
            self.values[field], _ = codec.blob_records(
                self.core, self.thread_id, field, channel, value
            )
        self.ids.append(checkpoint["id"])
        return checkpoint["id"]

    def member(self, checkpoint_id: str) -> str:
        return self.core.keys.checkpoint_member("", checkpoint_id)

    def entry(self, checkpoint_id: str, record: bytes | None = None) -> list[Any]:
        """One entry of ``read_checkpoints.lua``: member, record, writes, lost flag."""
        member = self.member(checkpoint_id)
        return [member.encode(), record if record is not None else self.records[member], [], 0]

    def read_reply(self, *entries: list[Any], unindexed: list[bytes] | None = None) -> list[Any]:
        return [[], unindexed or [], *entries]

    def hmget(self, op: Batch) -> list[Any]:
        """The reply to a batch holding one HMGET of channel values."""
        ((_, _, *fields),) = op.commands
        return [[self.values.get(f) for f in fields]]


def config(checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": THREAD, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
