"""langgraph-durable: a LangGraph checkpointer on plain Redis that survives crashes.

from langgraph_durable import RedisSaver
with RedisSaver.from_conn_string("redis://localhost:6379") as saver:
    graph = builder.compile(checkpointer=saver)

The public names load on first use (PEP 562): ``import langgraph_durable`` alone, as the
command line's ``--version`` and ``--help`` do, imports no LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from langgraph_durable.shallow import AsyncShallowRedisSaver, ShallowRedisSaver
    from langgraph_durable.tools.migration import migrate

# Where each public name lives.
_WHERE = {
    "AsyncRedisSaver": "langgraph_durable.aio",
    "AsyncShallowRedisSaver": "langgraph_durable.shallow",
    "ShallowRedisSaver": "langgraph_durable.shallow",
    "RedisSaver": "langgraph_durable.saver",
    "Lease": "langgraph_durable.lease",
    "ResignReport": "langgraph_durable.core.resign",
    "migrate": "langgraph_durable.tools.migration",
    **dict.fromkeys(
        ["Finding", "MigrationReport", "RecoveryReport", "SkippedCheckpoint"]
        + ["ThreadMigration", "VerifyReport"],
        "langgraph_durable.core.reports",
    ),
    **dict.fromkeys(
        ["DivergenceAnswer", "EscalationAnswer", "LedgerEntry", "ToolLedger", "idempotency_key"],
        "langgraph_durable.ledger",
    ),
    **dict.fromkeys(
        ["CheckpointCorruptedError", "CheckpointLostError", "ConfigurationError"]
        + ["DurableError", "EventLoopError", "FailoverTimeoutError", "InvalidConfigError"]
        + ["LeaseHeldError", "LeaseLostError", "MigrationSourceError", "NotReplicatedError"]
        + ["RecordDamagedError", "ToolCallDivergedError", "ToolOutcomeUnknownError"]
        + ["UnreadableThreadError", "ValueTooLargeError"],
        "langgraph_durable.errors",
    ),
}
# langgraph.json may name the server's factory "langgraph_durable.server:checkpointer";
# langgraph-api 0.16 splits such a path at its last dot and looks up "server:checkpointer"
# in this package, so that name answers too ("langgraph_durable.server.checkpointer" is
# what it reads as written).
_SERVER_FACTORY = "server:checkpointer"


def _server_factory(*args: Any, **kwargs: Any) -> Any:
    """``langgraph_durable.server.checkpointer``, loaded when LangGraph Server calls it
    (it reads the name from the module's ``__dict__``, so it must be there already)."""
    return importlib.import_module("langgraph_durable.server").checkpointer(*args, **kwargs)


globals()[_SERVER_FACTORY] = _server_factory


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'langgraph_durable' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
