"""What a plan may yield: the operations a sans-I/O plan asks its shell to carry out.

Owns the operation types and nothing else. Rules every plan keeps:
  * A plan is a generator: it yields one of these operations, is sent the reply, and
    returns its result (``Plan[T]``). It never does I/O itself.
  * Every operation of a per-thread plan touches one thread's keys, so one cluster slot;
    only ``ScanKeys`` (and the shell's handling of it) and a batch's ``ahead`` commands
    (the run index, ``runs.py``) cross slots.
  * ``Emit`` is not sent to Redis: the shell hands its item to the caller (listings).
  * ``Note`` is not sent either: it tells the shell's telemetry what an operator must
    notice on the way; ``traced`` tells it which saver operation a plan is.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Script:
    """Run one of the Lua scripts of ``scripts.py``; all keys are in one slot."""

    name: str
    keys: list[str]
    args: list[Any]
    layout: str = ""  # layouts.COMPACT: KEYS in the compact layout, for that variant


@dataclass(frozen=True)
class Command:
    """Run one Redis command; its first key decides the node in a cluster."""

    args: tuple[Any, ...]


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Batch:
    """Run several commands of one slot in one round trip: a pipeline, or with ``atomic``
    a MULTI/EXEC transaction. A ``Script`` among them is sent as EVALSHA (the shell
    loads the scripts and resends the batch if Redis lost them).

    With ``errors_as_values`` a command's error reply comes back in its place in the
    list instead of being raised.

    ``ahead``: commands on keys of other slots (an index a write must not fail for) that
    run before the batch, in the same round trip where the client can (one server, or
    a cluster pipeline without MULTI), else just before it. Their replies are not
    returned; an error among them is logged, never raised."""

    commands: list[tuple[Any, ...] | Script]
    errors_as_values: bool = False
    atomic: bool = False
    ahead: tuple[tuple[Any, ...], ...] = ()
    # (replicas, timeout_ms): Redis WAIT after the batch, on the connection that sent it
    # (WAIT counts the acknowledgements of its own connection's writes); its reply, the
    # replicas that acknowledged, is one more result at the end.
    wait_replicas: tuple[int, int] | None = None
    # A write the plan can do without (the quarantine a read attempts): a server state
    # that refuses it (READONLY...) comes back as its value at once, not ridden out.
    best_effort: bool = False


@dataclass(frozen=True)
class ScanKeys:
    """SCAN every node for keys matching ``pattern``: only for cross-thread operations."""

    pattern: str


@dataclass(frozen=True)
class Emit(Generic[T]):
    """Hand one result of a listing to the caller."""

    item: T


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Operation:
    """The saver operation a plan carries out (its span's name), and where: given, or
    read from ``config`` (and a put's ``checkpoint``) only when a span records it."""

    name: str
    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    config: Any = None
    checkpoint: Any = None

    def place(self) -> tuple[str | None, str | None, str | None]:
        """(thread, namespace, checkpoint id); what is missing or of another type is
        None (the plan itself refuses a bad config, typed)."""
        if self.config is None:
            return self.thread_id, self.checkpoint_ns, self.checkpoint_id
        thread_id, ns, checkpoint_id = where(self.config)
        if self.checkpoint is not None:
            checkpoint = self.checkpoint
            checkpoint_id = checkpoint.get("id") if _is_mapping(checkpoint) else None
        return thread_id, ns, checkpoint_id


def where(config: Any) -> tuple[str | None, str | None, str | None]:
    """(thread, namespace, checkpoint id) of a config, for the operation's span; what is
    missing or of another type is None: the plan itself refuses a bad config, typed."""
    # type() first: isinstance against an ABC costs more than the rest of this
    conf = config.get("configurable") if _is_mapping(config) else None
    if not _is_mapping(conf):
        return None, None, None
    thread_id, ns, checkpoint_id = conf.get(_T), conf.get(_NS), conf.get(_ID)
    return (
        str(thread_id) if isinstance(thread_id, str | int) else None,  # as the plans take it
        ns if isinstance(ns, str) else None,
        checkpoint_id if isinstance(checkpoint_id, str) else None,
    )


_T, _NS, _ID = "thread_id", "checkpoint_ns", "checkpoint_id"


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


@dataclass(frozen=True)
class Note:
    """Something an operator must notice (a fallback, a damaged record, a quarantine):
    a span event and a count. ``lgd.count`` in ``attributes``: how many it stands for."""

    event: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


# What a plan may yield, and a plan: yields Ops, is sent each reply, returns a T.
Op = Script | Command | Batch | ScanKeys | Emit[Any] | Note
Plan = Generator[Op, Any, T]


class Traced(Generator[Op, Any, T]):
    """A plan that says which saver operation it is (``operation``), for the shell's
    telemetry; otherwise the plan itself, step for step."""

    def __init__(self, operation: Operation, plan: Plan[T]) -> None:
        self.operation = operation
        self.plan = plan

    def send(self, value: Any) -> Op:
        return self.plan.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Op:
        if val is None and tb is None:
            return self.plan.throw(typ)
        return self.plan.throw(typ, val, tb)  # pragma: no cover - the old signature

    def close(self) -> None:
        self.plan.close()


def traced(
    name: str,
    plan: Plan[T],
    thread_id: str | None = None,
    checkpoint_ns: str | None = None,
    checkpoint_id: str | None = None,
) -> Plan[T]:
    """``plan`` as the saver operation ``name``: the shell's telemetry gives it a span."""
    return Traced(Operation(name, thread_id, checkpoint_ns, checkpoint_id), plan)


def traced_at(name: str, plan: Plan[T], config: Any, checkpoint: Any = None) -> Plan[T]:
    """``traced``, where it runs read from ``config`` (and ``checkpoint``: a put's id)
    only if a span records it (most runs have no tracer: nothing to read)."""
    return Traced(Operation(name, config=config, checkpoint=checkpoint), plan)
