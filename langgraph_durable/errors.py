"""``langgraph_durable.errors``: every exception a user can catch (defined in
``core/errors.py``, and ``FailoverTimeoutError`` in ``io/failover.py``, a redis-py
``ConnectionError`` too)."""

from langgraph_durable.core.errors import (
    CheckpointCorruptedError,
    CheckpointLostError,
    ConfigurationError,
    DurableError,
    EventLoopError,
    InvalidConfigError,
    LeaseHeldError,
    LeaseLostError,
    MigrationSourceError,
    NotReplicatedError,
    RecordDamagedError,
    ToolCallDivergedError,
    ToolOutcomeUnknownError,
    UnreadableThreadError,
    ValueTooLargeError,
)
from langgraph_durable.io.failover import FailoverTimeoutError

__all__ = [
    "CheckpointCorruptedError",
    "CheckpointLostError",
    "ConfigurationError",
    "DurableError",
    "EventLoopError",
    "FailoverTimeoutError",
    "InvalidConfigError",
    "LeaseHeldError",
    "LeaseLostError",
    "MigrationSourceError",
    "NotReplicatedError",
    "RecordDamagedError",
    "ToolCallDivergedError",
    "ToolOutcomeUnknownError",
    "UnreadableThreadError",
    "ValueTooLargeError",
]
