"""A write's round trip: one pipeline, acknowledged by replicas, a damaged key repaired.

Owns what every write plan (``writes.py``, the ledger's) does with its round trip.
Rules it keeps:
  * With ``wait_for_replicas``, the write is acknowledged by that many replicas or
    ``NotReplicatedError`` says it was not: WAIT goes in the write's own round trip, on
    the connection that wrote (it counts that connection's writes).
  * A write script that found a key of the wrong type (``LGD_REPAIR``) is sent again
    with the damaged twins to move it to; any other error reply is raised, typed
    (``reply_codes.py``).
"""

from __future__ import annotations

from typing import Any

from langgraph_durable.core import reply_codes
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import NotReplicatedError
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Batch, Plan, Script


def write_round_trip(
    ctx: PlanContext, commands: list[Any], raising: bool = False, **batch: Any
) -> Plan[tuple[list[Any], Any]]:
    """One write round trip: its replies (errors as values unless ``raising``) and,
    with ``wait_for_replicas``, the replicas that acknowledged it (WAIT rides on the
    connection that wrote: it counts that connection's writes)."""
    wait = (ctx.wait_for_replicas, ctx.replica_timeout_ms) if ctx.wait_for_replicas else None
    replies = yield Batch(commands, errors_as_values=not raising, wait_replicas=wait, **batch)
    return (replies[:-1], replies[-1]) if wait else (replies, None)


def write_reply(
    ctx: PlanContext, tk: ThreadKeys, script: Script, reply: Any, acked: Any
) -> Plan[tuple[Any, Any]]:
    """A write script's reply (and acknowledgements). One that found a key of the wrong
    type (LGD_REPAIR) is sent again with the damaged twins to move it to; other errors
    are raised, typed."""
    if reply_codes.needs_repair(reply):
        again = Script(script.name, tk.with_twins(), script.args)  # the full layout
        (reply,), acked = yield from write_round_trip(ctx, [again], raising=True)
        return reply, acked
    if isinstance(reply, Exception):
        raise reply_codes.typed(ctx.keys, script, reply)
    return reply, acked


def replicated(ctx: PlanContext, tk: ThreadKeys, acked: Any) -> None:
    """With ``wait_for_replicas``: the write just made reached that many replicas
    (WAIT after the last write round trip covers every write before it: replicas
    acknowledge one replication stream in order)."""
    if not ctx.wait_for_replicas:
        return
    if isinstance(acked, Exception):  # WAIT refused (an ACL without it, a replica)
        raise acked
    if int(acked) < ctx.wait_for_replicas:
        raise NotReplicatedError(
            thread_id=tk.thread_id,
            wanted=ctx.wait_for_replicas,
            acknowledged=int(acked),
            timeout_ms=ctx.replica_timeout_ms,
        )
