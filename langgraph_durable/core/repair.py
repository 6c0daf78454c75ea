"""Explicit repair: move what ``verify`` finds damaged to the thread's quarantine hash.

Owns the choice of what a repair moves, so that reads can be opened without ever
writing (``repair_on_read=False``, as the command line does) and damage is moved only
when asked (``langgraph-durable verify --repair``). A plan over the plan context
(``context.py``), like every plan here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langgraph_durable.core import verify
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.ops import Batch, Plan, Script
from langgraph_durable.core.records import NOT_INDEXED, may_be_configuration, member_label


@dataclass
class RepairReport:
    """What a repair of one thread moved to quarantine, and the findings it left alone."""

    thread_id: str
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, field, reason)
    left: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, field, why)
    reindexed: int = 0  # intact records put back into their index


def repair(ctx: PlanContext, thread_id: str) -> Plan[RepairReport]:
    """Verify the thread, then quarantine every damaged record it found, as a read with
    ``repair_on_read`` would: a checkpoint with a damaged or missing record or channel
    value, the damaged value itself, every pending write of a task with a damaged write
    (the task then runs again as a whole), and index members with no record or that the
    saver cannot have written. Intact records missing from their index are put back
    into it. Left alone: failures that may be this reader's configuration (a bad
    signature: a missing or wrong ``signing_key``)."""
    tk = ctx.keys.thread(str(thread_id))
    found = yield from verify.verify(ctx, thread_id)
    result = RepairReport(tk.thread_id)
    if not found.findings:
        return result
    write_index, write_fields = yield Batch([("ZRANGE", tk.wix, 0, -1), ("HKEYS", tk.wr)])
    writes = {member_label(m) for m in write_index} | {member_label(f) for f in write_fields}
    moves: dict[tuple[str, str], str] = {}  # (kind, field) -> reason
    reindex = False
    for finding in found.findings:
        if may_be_configuration(finding.reason):
            why = f"may be this reader's configuration: {finding.reason}"
            result.left.append((finding.kind, finding.field, why))
        elif finding.kind == "head":  # evidence of removed checkpoints: never moved
            why = f"{finding.reason}; `resign` writes a new head once this is understood"
            result.left.append((finding.kind, finding.field, why))
        elif finding.kind == "index" and finding.reason == NOT_INDEXED:
            reindex = True
        elif finding.kind == "write" or (finding.kind == "index" and finding.key == tk.wix):
            moves.setdefault(("wr", finding.field), finding.reason)
            for sibling in _siblings(ctx, finding.field, writes):
                moves.setdefault(("wr", sibling), f"sibling of a damaged write: {finding.reason}")
        elif finding.kind == "channel value" and finding.checkpoint_id is None:
            moves.setdefault(("bl", finding.field), finding.reason)
        elif finding.kind == "element":
            moves.setdefault(("el", finding.field), finding.reason)  # the digest, in hex
        else:  # a checkpoint: its record, one of its values, or its index member
            moves.setdefault(("cp", finding.field), finding.reason)
    args: list[str | bytes] = []
    for (kind, field_), reason in sorted(moves.items()):
        stored = bytes.fromhex(field_) if kind == "el" else field_  # elements: raw digests
        args += [kind, stored, ctx.keys.quarantine_field(kind, field_), reason]
        result.moved.append((kind, field_, reason))
    if args:
        yield Script("quarantine", tk.with_twins(), [ctx.ttl_arg, *args])
    if reindex:  # after the quarantine: a damaged record must not be indexed again
        result.reindexed = yield Script("reindex", tk.with_twins(), [ctx.ttl_arg])
    return result


def _siblings(ctx: PlanContext, write_member: str, writes: set[str]) -> list[str]:
    """The other writes of the same task of the same checkpoint."""
    try:
        own = ctx.keys.parse_write_member(write_member)
    except ValueError:  # MALFORMED: no task to go with it
        return []
    siblings = []
    for other in writes:
        try:
            parsed = ctx.keys.parse_write_member(other)
        except ValueError:
            continue
        same = (parsed.checkpoint_ns, parsed.checkpoint_id, parsed.task_id)
        if other != write_member and same == (own.checkpoint_ns, own.checkpoint_id, own.task_id):
            siblings.append(other)
    return siblings
