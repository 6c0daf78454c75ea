"""A ``module:factory`` migration source for the tests: a real SQLite checkpointer that
can be made to stop, for good, once it has handed out a number of checkpoints.

    langgraph-durable migrate --from tests.workers.migrate_source:sqlite_source
reads ``LGD_SOURCE_DB`` (the SQLite file) and ``LGD_STOP_AFTER`` (optional: after that
many ``get_tuple`` calls, the next one waits forever, so the migration stands still
with exactly that many checkpoints in Redis until the test kills it).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver


class StoppingSqliteSaver(SqliteSaver):
    def __init__(self, conn: sqlite3.Connection, stop_after: int | None) -> None:
        super().__init__(conn)
        self.stop_after = stop_after
        self.served = 0

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if self.stop_after is not None and self.served >= self.stop_after:
            threading.Event().wait()  # never set: the test kills this process here
        self.served += 1
        return super().get_tuple(config)


@contextmanager
def sqlite_source() -> Iterator[Any]:
    stop_after = os.environ.get("LGD_STOP_AFTER")
    conn = sqlite3.connect(os.environ["LGD_SOURCE_DB"], check_same_thread=False)
    try:
        yield StoppingSqliteSaver(conn, int(stop_after) if stop_after else None)
    finally:
        conn.close()
