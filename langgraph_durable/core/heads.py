"""Signed heads: a signed thread's tail is fresh, or its removal is reported.

Owns the ``head`` hash (keys.py): with ``signing_key``, every checkpoint put also writes,
in the same script, a record sealed like every other naming that checkpoint as the
newest of its namespace. Rules it keeps:
  * A read of a namespace's newest checkpoint reads the head in the same round trip. A
    head naming a checkpoint newer than any the read could use (one removed with its
    index member, record and writes) is reported like any damage: in the recovery report
    and the log, and as a ``verify`` finding. So is a missing or damaged head of a signed
    namespace that holds checkpoints (written before heads: ``resign`` adds them).
  * A deletion of a namespace's newest checkpoint writes the head again (a rollback:
    the newest left, or none); retention keeps the newest and leaves heads alone, so it
    never writes over what a head says; ``copy_thread`` writes the copy's own.
  * A head names a lower bound, never the only truth: a checkpoint newer than its head
    (two writers racing, a head lost with its key) is read as usual.
  * Ledger entries have a signed *mark* each (a field of the same hash): a digest of the
    body of the entry's newest record, written with it (``ledger_write.lua``,
    ``ledger_settle.lua``) and gone with it (``ledger_delete.lua``). An entry whose record
    is not the one its mark names (an older record of it written back: the intent of a
    call that finished) reads as damaged and tampered with: the call is escalated, never
    run again, whatever its policy.
What it cannot tell: someone with write access who puts back an older head together
with the older checkpoints it names (a consistent copy of the thread as it was), an
older entry record together with its older mark, or who deletes records or the whole
thread. Unsigned threads have neither: a checksum is no secret.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgpack

from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import SEP, KeySchema

KIND = "head"  # the record kind bound into a head's identity (and a ledger mark's)
MARK_PREFIX = "\x01\x03lg" + SEP  # a ledger mark's field: no escaped namespace starts so
REPLAYED = "replayed: not the newest record of this entry (its signed mark names another)"


def sealed_head(
    envelope: Envelope, thread_id: str, ns: str, checkpoint_id: str
) -> list[str | bytes]:
    """[head field, head record] naming ``checkpoint_id`` as the newest of ``ns``, or
    ["", ""] for an unsigned saver (the scripts then write no head)."""
    if not envelope.signed:
        return ["", ""]
    field = KeySchema.head_field(ns)
    body = msgpack.packb([checkpoint_id], use_bin_type=True)
    return [field, envelope.seal(KeySchema.identity(KIND, thread_id, field), body)]


def head_checkpoint(envelope: Envelope, thread_id: str, ns: str, record: Any) -> str:
    """The checkpoint id a head record names; ``RecordDamagedError`` if it does not
    verify or is not a head."""
    field = KeySchema.head_field(ns)
    body = envelope.open(KeySchema.identity(KIND, thread_id, field), record)
    try:
        (checkpoint_id,) = msgpack.unpackb(bytes(body), raw=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        raise RecordDamagedError("undecodable body (not a head)") from None
    if not isinstance(checkpoint_id, str):
        raise RecordDamagedError("undecodable body (not a head)")
    return checkpoint_id


def newest_by_namespace(keys: KeySchema, members: Iterable[str | bytes]) -> dict[str, str]:
    """The newest checkpoint id of each namespace among checkpoint ``members`` (those
    that do not parse are skipped)."""
    newest: dict[str, str] = {}
    for member in members:
        try:
            text = member.decode() if isinstance(member, bytes) else member
            ns, checkpoint_id = keys.parse_checkpoint_member(text)
        except (ValueError, UnicodeDecodeError):
            continue
        if checkpoint_id > newest.get(ns, ""):
            newest[ns] = checkpoint_id
    return newest


def stale_reason(head_id: str) -> str:
    return (
        f"missing: checkpoint {head_id}, the newest the signed head names (the thread's "
        "newest checkpoints were removed)"
    )


def body_digest(body: bytes | memoryview) -> bytes:
    return hashlib.sha256(body).digest()[:16]


def ledger_mark(
    envelope: Envelope, thread_id: str, ledger_field: str, body: bytes
) -> list[str | bytes]:
    """[mark field, mark record] naming ``body`` as the newest record body of a ledger
    entry, or ["", ""] for an unsigned saver."""
    if not envelope.signed:
        return ["", ""]
    field = MARK_PREFIX + ledger_field
    mark = msgpack.packb([body_digest(body)], use_bin_type=True)
    return [field, envelope.seal(KeySchema.identity(KIND, thread_id, field), mark)]


def replayed(
    envelope: Envelope, thread_id: str, ledger_field: str, body: bytes | memoryview, mark: Any
) -> bool:
    """Whether a ledger entry's verified record ``body`` is not the one its signed
    ``mark`` names (None: no mark, nothing to tell). A mark that does not verify counts as
    a mismatch."""
    if mark is None or not envelope.signed:
        return False
    field = MARK_PREFIX + ledger_field
    try:
        named = msgpack.unpackb(
            bytes(envelope.open(KeySchema.identity(KIND, thread_id, field), mark)), raw=False
        )[0]
    except (RecordDamagedError, ValueError, TypeError, IndexError, msgpack.UnpackException):
        return True
    return bool(named != body_digest(body))
