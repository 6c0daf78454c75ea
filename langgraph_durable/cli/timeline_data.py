"""What ``langgraph-durable timeline`` shows of a thread, gathered read-only (``gather``).

Owns the facts the page draws, each from what the thread stores (nothing is inferred
that the data does not say, and what is a guess says so):
  * every checkpoint with its step, time, run id and the node(s) that wrote it (the
    nodes whose ``versions_seen`` changed from its parent's);
  * damaged checkpoints and quarantined ones at their step (LangGraph writes the step
    into a checkpoint id, uuid6) with the checkpoint reads fall back to (the newest
    intact one before it in its namespace);
  * resumes: a checkpoint written after a silence (nothing written for more than
    ``GAP_FACTOR`` times the thread's median silence and ``GAP_MIN_S``) follows a gap:
    the worker stopped (or waited) there; a step whose recorded calls ran more than
    once, or were asked about, ran again;
  * the ledger's calls, quarantined records and operators' acknowledgements, the lease.
Read through the inspection saver: it works on a damaged thread and moves nothing.
"""

from __future__ import annotations

import itertools
import statistics
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langgraph_durable.core import incidents
from langgraph_durable.core.incidents import Acknowledgement
from langgraph_durable.core.overview import Quarantined, quarantined, thread_overview
from langgraph_durable.core.reports import RecoveryReport, VerifyReport
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.ledger.entries import LedgerEntry
from langgraph_durable.ledger.sites import checkpoint_step
from langgraph_durable.saver import RedisSaver

MAX_PROBLEMS = 50  # verify's findings listed on the page
GAP_FACTOR, GAP_MIN_S = 3.0, 0.5  # a gap: this many median silences, and this long
_NOT_NODES = frozenset(
    {"__interrupt__"}
)  # LangGraph's own bookkeeping in versions_seen  # a gap: this many median steps, and at least this long


@dataclass(frozen=True)
class Point:
    """One checkpoint as drawn: where it sits and what it says."""

    checkpoint_id: str
    checkpoint_ns: str
    step: int | None
    parent_id: str | None
    source: str
    created: str
    damaged: str | None = None  # why it does not verify
    nodes: tuple[str, ...] = ()  # what wrote it
    run_id: str | None = None
    falls_back_to: str | None = None  # a damaged one: where reads go instead
    gap_s: float | None = None  # written this long after its parent, an outlier
    ran_again: bool = False  # its step's recorded calls ran more than once, or asked
    went_on: str | None = None  # the process (host:pid) that wrote those calls last


@dataclass
class Timeline:
    thread_id: str
    points: list[Point] = field(default_factory=list)
    calls: list[LedgerEntry] = field(default_factory=list)
    quarantine: list[Quarantined] = field(default_factory=list)
    quarantined: int = 0  # how many records are in quarantine (``quarantine``: some of them)
    fallbacks: list[RecoveryReport] = field(default_factory=list)
    acknowledgements: list[Acknowledgement] = field(default_factory=list)
    leased_to: str | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why


def gather(saver: RedisSaver, thread_id: str) -> Timeline:
    """Everything the page shows of ``thread_id``, read without writing anything."""
    found = Timeline(thread_id)
    report: VerifyReport = saver.verify(thread_id)
    seen: dict[str, dict[str, Any]] = {}
    for tup in saver.list({"configurable": {"thread_id": thread_id}}):
        conf = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        step = tup.metadata.get("step")
        run_id = tup.metadata.get("run_id")
        seen[conf["checkpoint_id"]] = dict(tup.checkpoint.get("versions_seen") or {})
        found.points.append(
            Point(
                conf["checkpoint_id"],
                conf.get("checkpoint_ns", ""),
                step if isinstance(step, int) else None,
                parent,
                str(tup.metadata.get("source", "")),
                str(tup.checkpoint.get("ts", "")),
                run_id=str(run_id) if run_id else None,
            )
        )
    found.points = [_with_nodes(p, seen) for p in found.points]
    reasons = {f.checkpoint_id: f.reason for f in report.findings if f.checkpoint_id}
    damaged = {cid: ("", reasons.get(cid, "damaged")) for cid in report.damaged_checkpoints}
    found.quarantined, found.quarantine = saver.drive(quarantined(saver.core.keys, thread_id))
    for q in found.quarantine:
        if q.kind == "cp":
            try:  # stored bytes: a name that is no checkpoint member is listed, not drawn
                ns, cid = saver.core.keys.parse_checkpoint_member(q.field)
            except ValueError:
                continue
            damaged.setdefault(cid, (ns, f"quarantined: {q.reason}"))
    listed = {p.checkpoint_id for p in found.points}
    for cid, (ns, why) in sorted(damaged.items()):
        if cid not in listed:
            found.points.append(_damaged_point(found.points, cid, ns, why))
    for ns in sorted({p.checkpoint_ns for p in found.points} or {""}):
        try:
            saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}})
        except Exception as exc:  # noqa: BLE001 - shown on the page, never a traceback
            found.problems.append(f"reading namespace {ns!r}: {exc}")
        fell_back = saver.recovery_report(thread_id, ns)
        if fell_back is not None and fell_back.fell_back:
            found.fallbacks.append(fell_back)
    try:
        found.calls = ToolLedger(saver).entries(thread_id)
        found.acknowledgements = saver.drive(incidents.acknowledgements(saver.core, thread_id))
    except Exception as exc:  # noqa: BLE001 - as above
        found.problems.append(f"reading the ledger: {exc}")
    found.points = _resumes(found.points, found.calls)
    overview = saver.drive(thread_overview(saver.core.keys, thread_id))
    found.leased_to = overview.leased_to
    for what, counted in (("checkpoint index", overview.checkpoints), ("ledger", overview.ledger_entries)):  # fmt: skip
        if counted == "damaged":
            found.problems.append(f"the {what} key holds another type: run `verify --repair`")
    for finding in report.findings[:MAX_PROBLEMS]:  # what verify found, as it says it
        where = f" of checkpoint {finding.checkpoint_id}" if finding.checkpoint_id else ""
        found.problems.append(f"{finding.kind}{where} ({finding.field}): {finding.reason}")
    if len(report.findings) > MAX_PROBLEMS:
        found.problems.append(f"and {len(report.findings) - MAX_PROBLEMS} more: run `verify`")
    return found


def _with_nodes(p: Point, seen: dict[str, dict[str, Any]]) -> Point:
    """``p`` with the nodes that wrote it: those that saw new versions since its parent."""
    now, before = seen.get(p.checkpoint_id, {}), seen.get(p.parent_id or "", {})
    nodes = tuple(sorted(n for n, v in now.items() if before.get(n) != v and n not in _NOT_NODES))
    return Point(**{**vars(p), "nodes": nodes})


def _damaged_point(points: list[Point], cid: str, ns: str, why: str) -> Point:
    """A checkpoint that does not verify (or is in quarantine), at the step and time its
    id says, after the checkpoint reads fall back to: the newest intact one before it."""
    before = [p for p in points if p.checkpoint_ns == ns and p.checkpoint_id < cid]
    back = max(before, key=lambda p: p.checkpoint_id).checkpoint_id if before else None
    return Point(cid, ns, checkpoint_step(cid), back, "", _uuid6_time(cid), why, falls_back_to=back)


def _uuid6_time(checkpoint_id: str) -> str:
    """The time LangGraph wrote into a checkpoint id (uuid6), ISO 8601; "" if none."""
    try:
        value = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError):
        return ""
    if value.version != 6:
        return ""
    ticks = ((value.int >> 80) << 12) | ((value.int >> 64) & 0x0FFF)  # 100 ns since 1582
    seconds = (ticks - 0x01B21DD213814000) / 1e7
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def seconds_of(created: str) -> float | None:
    """A checkpoint's ``ts`` as seconds since the epoch, or None."""
    try:
        return datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        return None


def _resumes(points: list[Point], calls: list[LedgerEntry]) -> list[Point]:
    """``points`` with their gaps and the steps that ran again (a call of theirs ran more
    than once, or was asked about). A gap is a silence before a checkpoint: no checkpoint
    written and no call started or finished for longer than ``GAP_FACTOR`` times the
    thread's median silence and ``GAP_MIN_S`` (a worker killed and another started, or a
    run waiting for an answer)."""
    events = sorted(
        [t for p in points if not p.damaged and (t := seconds_of(p.created)) is not None]
        + [t for e in calls for t in (e.started_at, e.finished_at) if isinstance(t, float)]
    )
    silences = [b - a for a, b in itertools.pairwise(events)]
    floor = max(GAP_MIN_S, GAP_FACTOR * statistics.median(silences)) if silences else 0.0
    again: dict[tuple[str, int | None], str | None] = {}
    for e in sorted(calls, key=lambda e: e.finished_at or e.started_at or 0.0):
        if not e.model_call and (e.attempts > 1 or e.escalations or e.outcome_unknown):
            place = (graph_of_call(e.checkpoint_ns), e.step)
            again[place] = e.worker or again.get(place)  # the last writer that says
    out = []
    for p in points:
        at = seconds_of(p.created)
        gap = None
        if at is not None and not p.damaged:
            before = [t for t in events if t < at]
            if before and at - before[-1] > floor:
                gap = at - before[-1]
        place = (graph_of_checkpoint(p.checkpoint_ns), p.step)
        ran = place in again and not p.damaged
        went_on = again.get(place) if ran else None
        out.append(Point(**{**vars(p), "gap_s": gap, "ran_again": ran, "went_on": went_on}))
    return out


def graph_of_call(ns: str) -> str:
    """The graph a recorded call's task ran in, by node names: its namespace (the ledger
    keeps nodes and steps, not task ids: ``ledger/sites.py``) without the task's own."""
    graph = ns.rpartition("|")[0]
    return "|".join(part.partition("@")[0] for part in graph.split("|")) if graph else ""


def graph_of_checkpoint(ns: str) -> str:
    """A checkpoint namespace by node names (``node:task_id|...`` -> ``node|...``)."""
    return "|".join(part.partition(":")[0] for part in ns.split("|")) if ns else ""
