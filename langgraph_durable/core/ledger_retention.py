"""Which ledger entries retention may drop: the ledger's rule, applied by ``retention.py``.

A replay runs the steps after the checkpoint it starts from, so once the oldest root
checkpoint left is at step N, no entry of a top-level task at step N or before can be
replayed again. Entries of subgraph tasks (their namespace holds ``|``) are kept: their
steps count in the subgraph, not the root. Fields are read with the index's members
and the hash's own, so entries whose index member was lost go too.
"""

from __future__ import annotations

from langgraph_durable.core.keys import KeySchema, ThreadKeys
from langgraph_durable.core.ops import Plan, Script


def forget_replayed(keys: KeySchema, tk: ThreadKeys, ttl_arg: int, oldest_step: int) -> Plan[None]:
    """Delete the ledger entries of top-level tasks at or before ``oldest_step``."""
    _, _, flat, *_ = yield Script("ledger_read", tk.with_twins(), ["-", "+", "fields", ""])
    stale = []
    for raw in flat:
        try:
            where = keys.parse_ledger_field(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if "|" not in where.checkpoint_ns and where.step <= oldest_step:
            stale.append(raw)
    if stale:
        yield Script("ledger_delete", tk.with_twins(), [ttl_arg, *stale])
