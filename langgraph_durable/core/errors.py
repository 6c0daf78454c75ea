"""Every exception a user of langgraph-durable can catch, each named for what happened
(but ``FailoverTimeoutError``, a redis-py ``ConnectionError`` too: ``io/failover.py``).
Users import them from ``langgraph_durable`` or ``langgraph_durable.errors``."""

from __future__ import annotations

import asyncio


class DurableError(Exception):
    """Base class of every langgraph-durable error."""


class RecordDamagedError(DurableError):
    """A stored record failed verification; raised inside the saver, never past a read.

    ``reason`` is one of: ``missing``, ``truncated``, ``checksum mismatch``,
    ``bad signature...``, ``unknown format version N``, ``unknown algorithm N``,
    ``not a langgraph-durable record``, ``undecodable body``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CheckpointCorruptedError(DurableError):
    """A checkpoint asked for by id is damaged; names the thread, checkpoint and key."""

    def __init__(
        self,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        key: str,
        reason: str,
    ) -> None:
        super().__init__(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (namespace "
            f"{checkpoint_ns!r}) is damaged: {reason} at {key!r}"
        )
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.key = key
        self.reason = reason


class CheckpointLostError(DurableError):
    """A checkpoint write builds on a checkpoint that is gone from Redis; it was refused.

    The parent checkpoint (or a channel value it passes on) was stored when the run read it
    and is missing now: the database was flushed, Redis restarted without persistence,
    or the keys were evicted or expired. A checkpoint written on it could never be read
    back whole, so nothing of the write was applied.
    """

    def __init__(
        self,
        *,
        thread_id: str,
        checkpoint_ns: str,
        parent_checkpoint_id: str | None,
        missing: str,
        checkpoint_id: str | None = None,
    ) -> None:
        what = (
            f"checkpoint {parent_checkpoint_id!r} of thread {thread_id!r} (namespace "
            f"{checkpoint_ns!r}), which this write builds on, is gone from Redis"
            if parent_checkpoint_id is not None
            else f"a value checkpoint {checkpoint_id!r} of thread {thread_id!r} (namespace "
            f"{checkpoint_ns!r}, no parent) keeps is gone from Redis, though checkpoints of "
            "its namespace stored it"
        )
        super().__init__(
            f"{what} ({missing}): "
            "the data was flushed, lost in a restart without persistence, evicted or expired. "
            "Nothing was written. Resume the thread from a checkpoint that still exists "
            "(graph.get_state_history) or run it again from its input; to keep this from "
            "happening, run Redis with persistence (appendonly yes), maxmemory-policy "
            "noeviction, and a ttl longer than a run"
        )
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent_checkpoint_id = parent_checkpoint_id
        self.checkpoint_id = checkpoint_id  # the checkpoint refused, when it has no parent
        self.missing = missing


class ConfigurationError(DurableError, ValueError):
    """The saver was given a client or an option it cannot work with."""


class InvalidConfigError(DurableError, ValueError):
    """A RunnableConfig (or an id) passed to the saver lacks what the operation needs, or
    holds a value the saver cannot store: a wrong type, or a string with a lone surrogate
    (``"\\ud800"``), which has no UTF-8 form and so cannot be part of a Redis key."""


class ValueTooLargeError(DurableError, ValueError):
    """A value would make a record larger than Redis accepts for one value
    (``proto-max-bulk-len``, 512 MB by default); raised before anything is sent.

    ``what`` names the value (the channel, and the task for a pending write),
    ``size`` is the record's size in bytes (at least) and ``limit`` the limit.
    """

    def __init__(self, *, thread_id: str, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} of thread {thread_id!r} would be a record of {size} bytes (or more), "
            f"over Redis's limit of {limit} bytes for one value (proto-max-bulk-len); "
            "nothing of this write was sent"
        )
        self.thread_id = thread_id
        self.what = what
        self.size = size
        self.limit = limit


class EventLoopError(DurableError, asyncio.InvalidStateError):
    """A sync call on an ``AsyncRedisSaver`` cannot run on the saver's event loop: it has
    none yet, the loop is closed or not running (the call would wait forever), or the
    call comes from the loop's own thread (it would deadlock)."""


class ToolOutcomeUnknownError(DurableError):
    """A recorded tool call may or may not have taken effect, and its policy says fail.

    Raised when the ledger holds the intent of a call but no result (the process died
    during the call, or the record was damaged) and the tool's policy is ``fail``, or a
    human answered an escalation with ``{"action": "fail"}``.
    """

    def __init__(
        self,
        *,
        thread_id: str,
        tool_call_id: str | None,
        name: str,
        idempotency_key: str,
        reason: str,
    ) -> None:
        super().__init__(
            f"the outcome of tool call {name!r} (tool_call_id {tool_call_id!r}, idempotency "
            f"key {idempotency_key!r}) in thread {thread_id!r} is unknown: {reason}"
        )
        self.thread_id = thread_id
        self.tool_call_id = tool_call_id
        self.name = name
        self.idempotency_key = idempotency_key
        self.reason = reason


DIVERGED_ADVICE = (
    "the ledger will not return a recorded result for a different call "
    "(ToolLedger's default on_divergence='escalate' asks a human through "
    "interrupt(); 'new_call' runs it as a new call)"
)


class ToolCallDivergedError(DurableError):
    """A replayed call differs from the call the ledger recorded at its place.

    Returning the recorded result would hand the graph the answer to a different
    question, so the ledger stops: with ``on_divergence="raise"``, or when a human
    answered the divergence's ``interrupt()`` with ``{"action": "fail"}`` (``reason``
    says so). Names what was recorded and what was asked.
    """

    def __init__(
        self,
        *,
        thread_id: str,
        position: int,
        recorded_name: str,
        recorded_args: object,
        requested_name: str,
        requested_args: object,
        reason: str | None = None,
    ) -> None:
        advice = reason or DIVERGED_ADVICE
        super().__init__(
            f"call {position} of this task in thread {thread_id!r} was recorded as "
            f"{recorded_name}({recorded_args!r}) but is now "
            f"{requested_name}({requested_args!r}); {advice}"
        )
        self.thread_id = thread_id
        self.position = position
        self.recorded_name = recorded_name
        self.recorded_args = recorded_args
        self.requested_name = requested_name
        self.requested_args = requested_args
        self.reason = reason


class LeaseHeldError(DurableError):
    """Another worker holds the lease on this thread: this worker must not run it.

    Raised when acquiring a lease the holder has not released (``holder`` names it,
    ``expires_in`` says how many seconds it has left unless renewed), and by any write
    made without the lease while another worker holds it.
    """

    def __init__(self, *, thread_id: str, holder: str, expires_in: float) -> None:
        super().__init__(
            f"thread {thread_id!r} is leased to {holder!r} (for {expires_in:.1f} s more "
            "unless renewed); only the lease holder may write to it"
        )
        self.thread_id = thread_id
        self.holder = holder
        self.expires_in = expires_in


class LeaseLostError(DurableError):
    """This worker's lease on the thread is gone and its write was rejected, unapplied.

    The lease expired and another worker acquired the thread (or the thread was deleted):
    what this worker would write could overwrite the new owner's progress.
    """

    def __init__(self, *, thread_id: str, token: str, newest: str | None) -> None:
        super().__init__(
            f"the lease of this worker on thread {thread_id!r} (fencing token {token}) was "
            + (
                f"taken over by a newer one (token {newest})"
                if newest
                else "lost (the thread was deleted or expired)"
            )
            + "; the write was rejected and nothing of it was applied"
        )
        self.thread_id = thread_id
        self.token = token
        self.newest = newest


class NotReplicatedError(DurableError):
    """A write reached the primary but fewer replicas than asked acknowledged it in time.

    The write is applied on the primary; it could still be lost if the primary fails
    before replicating it, so the saver stops the run here instead of building on it.
    """

    def __init__(self, *, thread_id: str, wanted: int, acknowledged: int, timeout_ms: int):
        super().__init__(
            f"a write to thread {thread_id!r} was acknowledged by {acknowledged} of the "
            f"{wanted} replicas asked for within {timeout_ms} ms (it is applied on the primary)"
        )
        self.thread_id = thread_id
        self.wanted = wanted
        self.acknowledged = acknowledged
        self.timeout_ms = timeout_ms


class UnreadableThreadError(DurableError):
    """No checkpoint of a thread can be read with this saver's configuration.

    Every checkpoint was skipped, and at least one for a reason that is likely the
    reader's configuration rather than damage: records not signed, or signed with a key
    the saver does not have; a type the serializer's allowlist refuses; a serializer or
    encryption key that cannot read them. Starting the thread over would silently
    discard its history, so the read raises instead. ``reasons`` maps checkpoint ids to
    why each was skipped.
    """

    def __init__(self, *, thread_id: str, checkpoint_ns: str, reasons: dict[str, str]) -> None:
        text = " ".join(reasons.values())
        if "not signed" in text:
            fix = (
                "they were written without signing_key: sign them once with "
                "saver.resign(from_unsigned=True) or `langgraph-durable resign --all "
                "--from-unsigned`"
            )
        elif "bad signature" in text:
            fix = "add the key they were signed with to signing_key (a list, newest first)"
        elif "refused type" in text:
            fix = "allow the type with allowed_types= (or through the compiled graph's state)"
        else:
            fix = "read them with the serializer (and encryption key) that wrote them"
        newest = next(iter(reasons.items()), ("?", "?"))
        super().__init__(
            f"none of the {len(reasons)} checkpoints of thread {thread_id!r} (namespace "
            f"{checkpoint_ns!r}) can be read with this saver's configuration (newest, "
            f"{newest[0]}: {newest[1]}); {fix}"
        )
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.reasons = reasons


class MigrationSourceError(ConfigurationError):
    """The saver to migrate from cannot be opened: an unknown kind of source, a package it
    needs is not installed (the message names the pip extra), a file that is not there, a
    ``module:factory`` that cannot be imported or returns no checkpointer, or a database
    that refuses the connection. The message masks any password of the source's URL."""
