"""``verify``: check every record of a thread without changing anything.

Owns the verify plan (one round trip: both indexes, every record hash, the quarantine's
size) and what counts as a finding: a record that does not verify or deserialize, an
index member without its record or a record outside its index, a malformed member, a
checkpoint whose channel values (or the elements their manifests name) are missing or
damaged, an element that is not the bytes its digest names. Repair (``repair.py``) acts on
these findings; reads never call this. Built on the record codec (``codec.py``).
"""

from __future__ import annotations

from typing import Any

from langgraph_durable.core import blocks, codec, elements
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ValueRecords
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.heads import head_checkpoint, newest_by_namespace, stale_reason
from langgraph_durable.core.keys import SEP, ThreadKeys
from langgraph_durable.core.manifests import BLOCKED_MARK, blocked_in
from langgraph_durable.core.ops import Batch, Plan
from langgraph_durable.core.records import (
    MALFORMED,
    NOT_INDEXED,
    Damage,
    DamagedCheckpoint,
    member_label,
    wrong_type_as_empty,
)
from langgraph_durable.core.reports import Finding, VerifyReport


def _named_by_verified(
    ctx: PlanContext, thread_id: str, blobs: ValueRecords, writes: dict[bytes, bytes]
) -> set[bytes]:
    """The element digests named by the manifests (channel values, pending writes)
    that verify for this reader."""
    named: set[bytes] = set()
    opened = [("bl", field_, record) for field_, record in blobs.items()]
    opened += [("wr", member_label(m), r) for m, r in writes.items()]
    for kind, field_, record in opened:
        try:
            decoded = codec.open_record(ctx, kind, thread_id, field_, record)
        except RecordDamagedError:
            continue
        type_, data = decoded[-2:] if len(decoded) >= 2 else (None, None)
        try:
            if type_ == BLOCKED_MARK and kind == "bl":
                blocked = blocked_in(data)
                named.update(blocked)  # its blocks, even where one is damaged
                named.update(blocks.expand(ctx, blocked, blobs))
            elif type_ in elements.MARKS:
                named.update(elements.digests_in(type_, data))
        except RecordDamagedError:
            continue
    return named


def verify(ctx: PlanContext, thread_id: str) -> Plan[VerifyReport]:
    """Check every record of a thread without changing anything (one round trip)."""
    tk = ctx.keys.thread(str(thread_id))
    keys = (tk.cps, tk.cp, tk.wix, tk.wr, tk.bl, tk.qt, tk.el, tk.head)
    replies = yield Batch(
        [
            ("ZRANGE", tk.cps, 0, -1),
            ("HGETALL", tk.cp),
            ("ZRANGE", tk.wix, 0, -1),
            ("HGETALL", tk.wr),
            ("HGETALL", tk.bl),
            ("HLEN", tk.qt),
            ("HGETALL", tk.el),
            ("HGETALL", tk.head),
        ],
        errors_as_values=True,
    )
    (cp_index, cps, wix, wrs, bls, quarantined, els, heads), wrong = wrong_type_as_empty(
        replies, ([], {}, [], {}, {}, 0, {}, {})
    )
    report = VerifyReport(tk.thread_id, quarantined=quarantined)
    report.findings += [Finding("index", keys[i], "", "key of the wrong type") for i in wrong]
    blobs = ValueRecords({member_label(f): r for f, r in bls.items()}, trust_cache=False)
    blobs.elements.update(els)
    named = _named_by_verified(ctx, tk.thread_id, blobs, wrs)
    for digest, stored in sorted(blobs.elements.items()):
        try:
            elements.unpack(digest, stored, ctx.element_keys)
        except RecordDamagedError as exc:
            reason = exc.reason
            if digest not in named and Damage.of(reason) is Damage.CHECKSUM_MISMATCH:
                # No manifest this reader verifies names it: its digest may be keyed
                # with a signing key this reader lacks. Damage only where a verified
                # manifest vouches for it, so repair never moves a thread's elements
                # for a reader's configuration.
                reason = (
                    f"{Damage.BAD_SIGNATURE} element {digest.hex()} "
                    "(no manifest this reader verifies names it)"
                )
            report.findings.append(Finding("element", tk.el, digest.hex(), reason))
    bad_blobs: dict[str, str] = {}
    for blob_field in list(blobs):
        try:
            codec.open_blob(ctx, tk.thread_id, blob_field, blobs)
        except RecordDamagedError as exc:
            bad_blobs[blob_field] = exc.reason
            report.findings.append(Finding("channel value", tk.bl, blob_field, exc.reason))
    indexed = {member_label(m) for m in cp_index}
    records = {member_label(m): r for m, r in cps.items()}
    for member in sorted(indexed | set(records)):
        try:
            checkpoint_id = ctx.keys.parse_checkpoint_member(member)[1]
        except ValueError:
            report.findings.append(Finding("index", tk.cps, member, MALFORMED))
            continue
        if member not in records:
            report.findings.append(
                Finding("index", tk.cps, member, "missing record", checkpoint_id)
            )
            report.damaged_checkpoints.append(checkpoint_id)
            continue
        if member not in indexed:
            report.findings.append(Finding("index", tk.cps, member, NOT_INDEXED, checkpoint_id))
        entry = codec.decode_entry(ctx, tk, [member, records[member], []])
        if isinstance(entry, DamagedCheckpoint):
            report.findings.append(
                Finding("checkpoint", tk.cp, member, entry.reason, checkpoint_id)
            )
            report.damaged_checkpoints.append(checkpoint_id)
            continue
        problems = [
            f"{bad_blobs[f]} channel value {f!r}"
            if f in bad_blobs
            else f"missing channel value {f!r}"
            for f in codec.blob_fields(ctx, entry)
            if f in bad_blobs or f not in blobs
        ]
        for problem in problems:  # the checkpoint's own finding: repair moves it too
            report.findings.append(Finding("channel value", tk.bl, member, problem, checkpoint_id))
        (report.damaged_checkpoints if problems else report.intact_checkpoints).append(
            checkpoint_id
        )
    writes = {member_label(m): r for m, r in wrs.items()}
    write_index = {member_label(m) for m in wix}
    for write_member in sorted(write_index | set(writes)):
        try:
            checkpoint_id = ctx.keys.parse_write_member(write_member).checkpoint_id
        except ValueError:
            report.findings.append(Finding("index", tk.wix, write_member, MALFORMED))
            continue
        if write_member in writes and write_member not in write_index:
            report.findings.append(
                Finding("index", tk.wix, write_member, NOT_INDEXED, checkpoint_id)
            )
        try:
            codec.open_write(ctx, tk.thread_id, write_member, writes.get(write_member), blobs)
        except RecordDamagedError as exc:
            report.findings.append(Finding("write", tk.wr, write_member, exc.reason, checkpoint_id))
    if ctx.envelope.signed:
        _verify_heads(ctx, tk, records, heads, report)
    report.records_checked = len(records) + len(writes) + len(blobs) + len(blobs.elements)
    return report


def _verify_heads(
    ctx: PlanContext,
    tk: ThreadKeys,
    records: dict[str, Any],
    heads: dict[Any, Any],
    report: VerifyReport,
) -> None:
    """A signed thread's heads (heads.py): each namespace holding a checkpoint that
    verifies has one that verifies, naming no checkpoint newer than those stored.
    (Where none verifies, the reader's key may be what is wrong: said already.)"""
    newest = newest_by_namespace(ctx.keys, records)
    intact = set(report.intact_checkpoints)
    readable = newest_by_namespace(ctx.keys, [m for m in records if m.rsplit(SEP, 1)[-1] in intact])
    for ns, stored in sorted(newest.items()):
        if ns not in readable:
            continue
        field_ = ctx.keys.head_field(ns)
        record = heads.get(field_.encode())
        if record is None:
            reason = "missing: the signed head of the namespace (resign writes one)"
            report.findings.append(Finding("head", tk.head, field_, reason))
            continue
        try:
            head_id = head_checkpoint(ctx.envelope, tk.thread_id, ns, record)
        except RecordDamagedError as exc:
            report.findings.append(Finding("head", tk.head, field_, exc.reason))
            continue
        if head_id > stored:
            report.findings.append(Finding("head", tk.head, field_, stale_reason(head_id), head_id))
