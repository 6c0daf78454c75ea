"""Re-signing records in place: the step that completes a key rotation.

``signing_key=[new, old]`` signs new records with ``new`` and still verifies ``old``
ones. ``resign`` rewrites every record of a thread that verifies under one of the
configured keys (or, with ``from_unsigned``, carries only a valid checksum) as the saver
would seal it now: the newest key, the newest format (which binds the key prefix). Once
every thread is re-signed, ``old`` can be dropped from ``signing_key``.

Rules: a record is replaced only if it still holds the bytes it was read with (Lua
compare-and-set, ``reseal.lua``), so a concurrent write always wins; a record that does
not verify is left exactly as it is and reported; values are never deserialized. A
manifest (elements.py) it re-seals names its elements by digests taken with the newest
key: each element that verifies is stored under its new digest first, then the
manifests that name it are re-sealed, and the old digests, named by nothing, are
collected as retention collects (guarded by the write generation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from langgraph_durable.core import elements, reads, retention
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.heads import newest_by_namespace, sealed_head
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.manifests import (
    BLOCKED_MARK,
    VALUE_MARKS,
    blocked_in,
    blocked_manifest,
    blocked_tail_at,
)
from langgraph_durable.core.ops import Batch, Plan, Script
from langgraph_durable.core.records import member_label
from langgraph_durable.core.reports import Finding

_HASHES = ("cp", "wr", "bl", "lg", "head")  # record kinds, as bound into their identity
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


def resign_thread(ctx: PlanContext, thread_id: str, *, from_unsigned: bool) -> Plan[ResignReport]:
    tk = ctx.keys.thread(thread_id)
    report = ResignReport(tk.thread_id)
    *replies, stored_elements = yield Batch(
        [*(("HGETALL", getattr(tk, kind)) for kind in _HASHES), ("HGETALL", tk.el)],
        errors_as_values=True,
    )
    rekey = _Rekey(ctx.element_keys, stored_elements if isinstance(stored_elements, dict) else {})
    checksum_only = Envelope(None, ctx.envelope.key_prefix) if from_unsigned else None
    pending: list[Any] = []
    trusted: list[Any] = []  # checkpoint members whose record verifies
    for kind, records in zip(_HASHES, replies):
        key = getattr(tk, kind)
        if isinstance(records, Exception):  # a key of the wrong type: nothing to re-sign
            report.skipped.append(Finding("index", key, "", f"unreadable: {records}"))
            continue
        for raw_field, record in records.items():
            field_ = member_label(raw_field)
            identity = KeySchema.identity(kind, tk.thread_id, field_)
            if ctx.envelope.is_current(record):
                # A current manifest may still name digests of an older key (written
                # while both keys were configured): re-keyed too.
                if kind in ("bl", "wr") and elements.may_be_manifest(record, window=-1):
                    try:
                        body = ctx.envelope.open(identity, record)
                    except RecordDamagedError as exc:
                        report.skipped.append(Finding(_KIND_NAMES[kind], key, field_, exc.reason))
                        continue
                    rekeyed = rekey.body(kind, body)
                    if rekeyed is not body:
                        pending += [kind, raw_field, record, ctx.envelope.seal(identity, rekeyed)]
                        continue
                report.current += 1
                if kind == "cp":
                    trusted.append(raw_field)
                continue
            try:
                body = _open(ctx.envelope, checksum_only, identity, record)
            except RecordDamagedError as exc:
                report.skipped.append(Finding(_KIND_NAMES[kind], key, field_, exc.reason))
                continue
            if kind in ("bl", "wr"):
                body = rekey.body(kind, body)
            if kind == "cp":
                trusted.append(raw_field)
            pending += [kind, raw_field, record, ctx.envelope.seal(identity, body)]
    if ctx.envelope.signed:  # a namespace without a head gets one (heads.py)
        pending += _missing_heads(ctx, tk.thread_id, trusted, replies[4])
    if rekey.stored:  # before the manifests naming them
        flat = [x for pair in sorted(rekey.stored.items()) for x in pair]
        yield Batch([("HSET", tk.el, *flat)])
    for start in range(0, len(pending), 4 * _CHUNK):
        report.resigned += yield Script("reseal", tk.all(), pending[start : start + 4 * _CHUNK])
    if rekey.stored:  # the old digests: named by nothing once every manifest is re-sealed
        yield from retention.collect(ctx, tk, lambda decoded, pinned: set())
    return report


def _missing_heads(ctx: PlanContext, thread_id: str, cps: list[Any], heads: Any) -> list[Any]:
    """Reseal quadruples that write a head naming the newest checkpoint whose record
    verifies (``cps``) for each namespace that has none (written before heads, or
    unsigned): only where none is."""
    if not isinstance(heads, dict):
        return []
    out: list[Any] = []
    for ns, checkpoint_id in sorted(newest_by_namespace(ctx.keys, cps).items()):
        field_, record = sealed_head(ctx.envelope, thread_id, ns, checkpoint_id)
        if field_.encode() not in heads:
            out += ["head", field_, "", record]  # "": only if still absent (reseal.lua)
    return out


class _Rekey:
    """Manifests re-sealed under the newest key name their elements by digests taken
    with its element key: the new digests, and the elements to store under them."""

    def __init__(self, keys: tuple[bytes, ...], stored: dict[bytes, bytes]) -> None:
        self.key = keys[0] if keys else b""
        self.keys = keys
        self.elements = stored
        self.stored: dict[bytes, bytes] = {}  # new digest -> element

    def body(self, kind: str, body: bytes | memoryview) -> bytes | memoryview:
        if not elements.may_be_manifest(bytes(body), window=96 if kind == "bl" else -1):
            return body
        try:
            items = msgpack.unpackb(bytes(body), raw=False)
            # bl: [mark, manifest]; wr: [channel, mark, manifest] (a channel may be named
            # like a mark: never taken for one)
            first = 1 if kind == "wr" else 0
            marks = elements.MARKS if kind == "wr" else VALUE_MARKS
            at = next(i for i in range(first, len(items)) if items[i] in marks) + 1
            if items[at - 1] == BLOCKED_MARK:
                manifest = self._blocked(items[at])
            else:
                manifest = self._manifest(items[at - 1], items[at])
        except (ValueError, TypeError, StopIteration, msgpack.UnpackException, RecordDamagedError):
            return body  # not a manifest after all: re-sealed as it is
        if manifest == items[at]:
            return body
        items[at] = manifest
        return msgpack.packb(items, use_bin_type=True)  # type: ignore[no-any-return]

    def _manifest(self, mark: str, manifest: bytes) -> bytes:
        """An ``lgdl1`` or ``lgdm1`` manifest naming its elements by their new digests."""
        digests = elements.digests_in(mark, manifest)
        renamed = [self._digest(d) for d in digests]
        if renamed == list(digests):
            return manifest
        return elements.with_digests(mark, manifest, renamed)

    def _blocked(self, manifest: bytes) -> bytes:
        """An ``lgdb1`` manifest (blocks.py) naming blocks that name the new digests,
        each block re-keyed too; a block missing or damaged stays (reported as before)."""
        blocked = blocked_in(manifest)
        tail = manifest[blocked_tail_at(len(blocked.blocks)) :]
        renamed = [self._block(blocked.kind, d) for d in blocked.blocks]
        tail = self._manifest(blocked.kind, tail) if tail else tail
        return blocked_manifest(blocked.kind, renamed, tail)

    def _block(self, kind: str, digest: bytes) -> bytes:
        stored = self.elements.get(digest)
        if stored is None or elements.key_of(digest, stored, self.keys) is None:
            return digest
        inner = self._manifest(kind, elements.unpack(digest, stored, self.keys)[1])
        block = b"%s\x00%s" % (kind.encode(), inner)
        if block == stored and elements.key_of(digest, stored, self.keys) == self.key:
            return digest  # current already
        new = elements.digest_of(block, self.key)
        self.stored[new] = block
        return new

    def _digest(self, digest: bytes) -> bytes:
        stored = self.elements.get(digest)
        if stored is None or elements.key_of(digest, stored, self.keys) in (None, self.key):
            return digest  # missing or damaged (reported as before), or current already
        new = elements.digest_of(stored, self.key)
        self.stored[new] = stored
        return new


def resign_threads(
    ctx: PlanContext, thread_id: str | None, *, from_unsigned: bool
) -> Plan[list[ResignReport]]:
    """Re-sign one thread, or every thread of the key prefix when ``thread_id`` is None."""
    thread_ids = (
        [str(thread_id)] if thread_id is not None else (yield from reads.all_thread_ids(ctx))
    )
    reports = []
    for tid in thread_ids:
        reports.append((yield from resign_thread(ctx, tid, from_unsigned=from_unsigned)))
    return reports


_KIND_NAMES = {
    "cp": "checkpoint", "wr": "write", "bl": "channel value", "lg": "ledger entry", "head": "head"
}  # fmt: skip


def _open(
    envelope: Envelope, checksum_only: Envelope | None, identity: bytes, record: bytes
) -> bytes | memoryview:
    try:
        return envelope.open(identity, record)
    except RecordDamagedError as exc:
        if checksum_only is None or exc.reason != "bad signature: record is not signed":
            raise
        return checksum_only.open(identity, record)
