"""langgraph-durable: a LangGraph checkpointer on plain Redis that survives crashes.

from langgraph_durable import RedisSaver
with RedisSaver.from_conn_string("redis://localhost:6379") as saver:
    graph = builder.compile(checkpointer=saver)
"""

from langgraph_durable.aio import AsyncRedisSaver
from langgraph_durable.core import Finding, RecoveryReport, SkippedCheckpoint, VerifyReport
from langgraph_durable.errors import (
    CheckpointCorruptedError,
    ConfigurationError,
    DurableError,
    InvalidConfigError,
    RecordDamagedError,
)
from langgraph_durable.saver import RedisSaver

__all__ = [
    "AsyncRedisSaver",
    "CheckpointCorruptedError",
    "ConfigurationError",
    "DurableError",
    "Finding",
    "InvalidConfigError",
    "RecordDamagedError",
    "RecoveryReport",
    "RedisSaver",
    "SkippedCheckpoint",
    "VerifyReport",
]

__version__ = "0.1.0"
