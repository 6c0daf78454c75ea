"""Every exception a user of langgraph-durable can catch, each named for what happened."""

from __future__ import annotations


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


class ConfigurationError(DurableError, ValueError):
    """The saver was given a client or an option it cannot work with."""


class InvalidConfigError(DurableError, ValueError):
    """A RunnableConfig passed to the saver lacks what the operation needs."""
