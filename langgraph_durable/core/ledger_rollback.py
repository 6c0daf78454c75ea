"""Rolled-back runs: their recorded decisions never answer a later run's calls.

LangGraph Server rolls a run back (``multitask_strategy="rollback"``, a cancelled run)
with ``delete_for_runs``, which deletes the run's checkpoints. Owns what that does to
the ledger: one record per rolled-back run and thread (``KeySchema.ledger_void_field``),
written beside the entries, in the same integrity envelope. Rules it keeps:
  * The run's entries are not rewritten: a tool call the run was still finishing may
    write its result after the rollback, and it must land. Every entry whose run id a
    void record names belongs to a void execution (``executions.py`` rule 1): its model
    answers are never replayed, its tool calls never answer a later call and are never
    a divergence.
  * A tool call of a rolled-back run whose effect may have happened (an intent without
    a result) stays visible to operators: ``escalations`` lists it, with its run, until
    one drops it (``operators.py``); ``ledger THREAD`` shows every entry with its run.
  * A void record that does not verify is no void (logged): forging one could only
    make a rolled-back run's decisions count again, never void another run's. It
    expires and is deleted and copied with the thread's other ledger records.
"""

from __future__ import annotations

import logging
import time

import msgpack

from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import LEDGER_RECORD, KeySchema, ThreadKeys
from langgraph_durable.core.ops import Batch, Plan

logger = logging.getLogger("langgraph_durable")


def void_runs(ctx: PlanContext, tk: ThreadKeys, run_ids: set[str]) -> Plan[None]:
    """Record that ``run_ids`` were rolled back in the thread ``tk`` (one round trip).

    Written without a fencing token, as the deletion of the runs' checkpoints is: a
    worker may hold the thread's lease while the server rolls its run back."""
    commands: list[tuple[object, ...]] = []
    body = msgpack.packb({"v": 1, "at": time.time(), "why": "rolled back"})
    for run_id in sorted(run_ids):
        field = KeySchema.ledger_void_field(run_id)
        record = ctx.envelope.seal(KeySchema.identity(LEDGER_RECORD, tk.thread_id, field), body)
        commands += [("HSET", tk.lg, field, record), ("ZADD", tk.lgx, 0, field)]
    ttl = ctx.ttl_arg
    if ttl:
        commands += [("EXPIRE", tk.lg, ttl), ("EXPIRE", tk.lgx, ttl)]
    replies = yield Batch(commands, errors_as_values=True)
    for reply in replies:
        if isinstance(reply, Exception):  # a ledger key of the wrong type (damaged)
            logger.error(
                "langgraph-durable: could not record the rollback of runs %s in thread %r: %s",
                sorted(run_ids),
                tk.thread_id,
                reply,
            )
            return


def voided_runs(ctx: PlanContext, thread_id: str, flat: list[bytes]) -> set[str]:
    """The runs the void records ``flat`` (field, record, ...) name, verified first."""
    runs = set()
    for i in range(0, len(flat), 2):
        field, record = flat[i], flat[i + 1]
        run_id = KeySchema.ledger_void_run(field)
        if run_id is None or not record:
            continue
        try:
            raw = ctx.envelope.open(KeySchema.identity(LEDGER_RECORD, thread_id, field), record)
            body = msgpack.unpackb(raw, raw=False)
            if not isinstance(body, dict) or body.get("v") != 1:
                raise RecordDamagedError("undecodable body")
        except (RecordDamagedError, ValueError, msgpack.UnpackException) as exc:
            reason = getattr(exc, "reason", type(exc).__name__)
            logger.error(
                "langgraph-durable: the rollback record of run %r in thread %r is damaged "
                "(%s): that run's decisions are not voided",
                run_id,
                thread_id,
                reason,
            )
            continue
        runs.add(run_id)
    return runs
