"""What an operator's listing shows of a thread without reading its records: whether it
exists, how many checkpoints and ledger entries it indexes, who holds its lease.

Owns those read-only plans, as plain functions over the key schema (no saver settings
needed), so the command line reads storage only through plans. A key of the wrong type
shows as ``"damaged"``, never as an error; a lease value that is not ``owner \\0 token``
shows as its text up to the first ``\\0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

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


@dataclass(frozen=True)
class Quarantined:
    kind: str  # cp, w, v, el, lg...: the kind of record (keys.py)
    field: str  # which record of that kind, as the quarantine names it
    reason: str  # why it was moved aside


MAX_QUARANTINE_SHOWN = 500


def quarantined(keys: KeySchema, thread_id: str) -> Plan[tuple[int, list[Quarantined]]]:
    """How many records of the thread were moved to quarantine, and why for at most
    ``MAX_QUARANTINE_SHOWN`` of them (any, HRANDFIELD: a hash of any size is read in
    bounded memory), in one round trip. The stored bytes are read as data only: a value
    that is not what the quarantine script writes shows as ``"unreadable"``."""
    tk = keys.thread(thread_id)
    count, found = yield Batch(
        [("HLEN", tk.qt), ("HRANDFIELD", tk.qt, MAX_QUARANTINE_SHOWN, "WITHVALUES")],
        errors_as_values=True,
    )
    if isinstance(count, Exception) or isinstance(found, Exception):
        return 1, [Quarantined("?", "?", "damaged: the quarantine key holds another type")]
    pairs = _pairs(found)
    shown = []
    for name, value in sorted(pairs):
        kind, field = keys.parse_quarantine_field(name)
        shown.append(Quarantined(kind, field, _reason(value)))
    return int(count), shown


def _pairs(found: object) -> list[tuple[object, object]]:
    """HRANDFIELD ... WITHVALUES as (field, value): RESP3 answers pairs, RESP2 a flat list."""
    if isinstance(found, dict):
        return list(found.items())
    if not isinstance(found, list):
        return []
    if all(isinstance(item, list | tuple) and len(item) == 2 for item in found):
        return [(item[0], item[1]) for item in found]
    return list(zip(found[::2], found[1::2]))


def _reason(value: object) -> str:
    try:
        # Lua's cmsgpack packs the record's bytes as a msgpack str: read them raw
        unpacked = msgpack.unpackb(value, raw=True, max_array_len=2, max_map_len=0)
    except Exception:  # noqa: BLE001 - stored bytes: anything may be there
        return "unreadable"
    if isinstance(unpacked, list) and unpacked and isinstance(unpacked[0], bytes):
        return unpacked[0].decode("utf-8", "replace")
    return "unreadable"
