"""What an operator's listing shows of a thread without reading its records: whether it
exists, how many checkpoints and ledger entries it indexes, who holds its lease.

Owns those read-only plans, as plain functions over the key schema (no saver settings
needed), so the command line reads storage only through plans. A key of the wrong type
shows as ``"damaged"``, never as an error; a lease value that is not ``owner \\0 token``
shows as its text up to the first ``\\0``.
"""

from __future__ import annotations

from dataclasses import dataclass

from langgraph_durable.core.keys import SEP, KeySchema
from langgraph_durable.core.ops import Batch, Command, Plan


@dataclass(frozen=True)
class ThreadOverview:
    checkpoints: int | str  # "damaged": the index key holds another type
    ledger_entries: int | str
    leased_to: str | None  # the lease's owner, None when no worker holds the thread


def thread_exists(keys: KeySchema, thread_id: str) -> Plan[bool]:
    """Whether Redis holds any key of the thread (its records, indexes, quarantine, or
    the twins a repair moved aside)."""
    tk = keys.thread(thread_id)
    found = yield Command(("EXISTS", *tk.all(), *tk.damaged()))
    return bool(found)


def thread_overview(keys: KeySchema, thread_id: str) -> Plan[ThreadOverview]:
    """Counts and lease holder of a thread, in one round trip."""
    tk = keys.thread(thread_id)
    checkpoints, entries, lease = yield Batch(
        [("ZCARD", tk.cps), ("ZCARD", tk.lgx), ("GET", tk.lease)], errors_as_values=True
    )
    return ThreadOverview(_count(checkpoints), _count(entries), _owner(lease))


def _count(reply: object) -> int | str:
    return "damaged" if isinstance(reply, Exception) else int(reply)  # type: ignore[call-overload]


def _owner(lease: object) -> str | None:
    if isinstance(lease, Exception):
        return "damaged"
    if not lease:
        return None
    raw = lease if isinstance(lease, bytes) else str(lease).encode()
    return raw.split(SEP.encode(), 1)[0].decode(errors="replace")
