"""langgraph-durable: a LangGraph checkpointer on plain Redis that survives crashes.

from langgraph_durable import RedisSaver
with RedisSaver.from_conn_string("redis://localhost:6379") as saver:
    graph = builder.compile(checkpointer=saver)
"""

from langgraph_durable.aio import AsyncRedisSaver
from langgraph_durable.core.reports import (
    Finding,
    MigrationReport,
    RecoveryReport,
    SkippedCheckpoint,
    ThreadMigration,
    VerifyReport,
)
from langgraph_durable.core.resign import ResignReport
from langgraph_durable.errors import (
    CheckpointCorruptedError,
    CheckpointLostError,
    ConfigurationError,
    DurableError,
    EventLoopError,
    FailoverTimeoutError,
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
from langgraph_durable.lease import Lease
from langgraph_durable.ledger import (
    DivergenceAnswer,
    EscalationAnswer,
    LedgerEntry,
    ToolLedger,
    idempotency_key,
)
from langgraph_durable.saver import RedisSaver
from langgraph_durable.server import checkpointer as _server_checkpointer
from langgraph_durable.shallow import AsyncShallowRedisSaver, ShallowRedisSaver
from langgraph_durable.tools.migration import migrate

__all__ = [
    "AsyncRedisSaver",
    "AsyncShallowRedisSaver",
    "CheckpointCorruptedError",
    "CheckpointLostError",
    "ConfigurationError",
    "DivergenceAnswer",
    "DurableError",
    "EscalationAnswer",
    "EventLoopError",
    "FailoverTimeoutError",
    "Finding",
    "InvalidConfigError",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "LedgerEntry",
    "MigrationReport",
    "MigrationSourceError",
    "NotReplicatedError",
    "RecordDamagedError",
    "RecoveryReport",
    "RedisSaver",
    "ResignReport",
    "ShallowRedisSaver",
    "SkippedCheckpoint",
    "ThreadMigration",
    "ToolCallDivergedError",
    "ToolLedger",
    "ToolOutcomeUnknownError",
    "UnreadableThreadError",
    "ValueTooLargeError",
    "VerifyReport",
    "idempotency_key",
    "migrate",
]

__version__ = "0.1.0"

# langgraph.json may name the server's factory "langgraph_durable.server:checkpointer";
# langgraph-api 0.16 splits such a path at its last dot and looks up "server:checkpointer"
# in this package, so that name answers too ("langgraph_durable.server.checkpointer" is
# what it reads as written).
globals()["server:checkpointer"] = _server_checkpointer
