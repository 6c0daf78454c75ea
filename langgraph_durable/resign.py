"""Re-signing records in place: the step that completes a key rotation.

``signing_key=[new, old]`` signs new records with ``new`` and still verifies ``old``
ones. ``resign`` rewrites every record of a thread that verifies under one of the
configured keys (or, with ``from_unsigned``, carries only a valid checksum) as the saver
would seal it now: the newest key, the newest format (which binds the key prefix). Once
every thread is re-signed, ``old`` can be dropped from ``signing_key``.

Rules: a record is replaced only if it still holds the bytes it was read with (Lua
compare-and-set, ``reseal.lua``), so a concurrent write always wins; a record that does
not verify is left exactly as it is and reported; bodies are never deserialized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_durable.ops import Batch, Plan, Script
from langgraph_durable.records import _label
from langgraph_durable.reports import Finding

if TYPE_CHECKING:
    from langgraph_durable.core import SaverCore
from langgraph_durable.envelope import Envelope
from langgraph_durable.errors import RecordDamagedError
from langgraph_durable.keys import KeySchema

_HASHES = ("cp", "wr", "bl", "lg")  # record kinds, as bound into each record's identity
_CHUNK = 256  # records per script call: big values pass through Lua, keep calls short


@dataclass
class ResignReport:
    """What ``saver.resign`` did to one thread."""

    thread_id: str
    resigned: int = 0  # records rewritten under the newest key and format
    current: int = 0  # records already sealed that way
    skipped: list[Finding] = field(default_factory=list)  # left as they were, and why

    @property
    def ok(self) -> bool:
        return not self.skipped


def resign_thread(core: SaverCore, thread_id: str, *, from_unsigned: bool) -> Plan[ResignReport]:
    tk = core.keys.thread(thread_id)
    report = ResignReport(tk.thread_id)
    replies = yield Batch(
        [("HGETALL", getattr(tk, kind)) for kind in _HASHES], errors_as_values=True
    )
    checksum_only = Envelope(None, core.envelope.key_prefix) if from_unsigned else None
    pending: list[Any] = []
    for kind, records in zip(_HASHES, replies):
        key = getattr(tk, kind)
        if isinstance(records, Exception):  # a key of the wrong type: nothing to re-sign
            report.skipped.append(Finding("index", key, "", f"unreadable: {records}"))
            continue
        for raw_field, record in records.items():
            if core.envelope.is_current(record):
                report.current += 1
                continue
            field_ = _label(raw_field)
            identity = KeySchema.identity(kind, tk.thread_id, field_)
            try:
                body = _open(core.envelope, checksum_only, identity, record)
            except RecordDamagedError as exc:
                report.skipped.append(Finding(_KIND_NAMES[kind], key, field_, exc.reason))
                continue
            pending += [kind, raw_field, record, core.envelope.seal(identity, body)]
            if len(pending) >= 4 * _CHUNK:
                report.resigned += yield Script("reseal", tk.all(), pending)
                pending = []
    if pending:
        report.resigned += yield Script("reseal", tk.all(), pending)
    return report


def resign_threads(
    core: SaverCore, thread_id: str | None, *, from_unsigned: bool
) -> Plan[list[ResignReport]]:
    """Re-sign one thread, or every thread of the key prefix when ``thread_id`` is None."""
    thread_ids = [str(thread_id)] if thread_id is not None else (yield from core.all_thread_ids())
    reports = []
    for tid in thread_ids:
        reports.append((yield from resign_thread(core, tid, from_unsigned=from_unsigned)))
    return reports


_KIND_NAMES = {"cp": "checkpoint", "wr": "write", "bl": "channel value", "lg": "ledger entry"}


def _open(
    envelope: Envelope, checksum_only: Envelope | None, identity: bytes, record: bytes
) -> bytes | memoryview:
    try:
        return envelope.open(identity, record)
    except RecordDamagedError as exc:
        if checksum_only is None or exc.reason != "bad signature: record is not signed":
            raise
        return checksum_only.open(identity, record)
