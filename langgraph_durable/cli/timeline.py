"""``langgraph-durable timeline THREAD --html FILE``: one self-contained page picturing a thread.

Owns gathering what a thread holds (``gather``: read-only, through the inspection saver,
so it works on a damaged thread and moves nothing) and drawing it (``render``: a pure
function of a ``Timeline``). The page has no script and loads nothing: inline CSS and
inline SVG only. It shows, per namespace, the checkpoints by step with their branches
(a checkpoint with more than one child is a fork; each child after the first opens a
lane), the damaged checkpoints and where a read fell back past them, the quarantined
records, the lease, and at their steps the tool and model calls: intent, result or
error, attempts, escalations and operators' decisions (who, when, why). Every stored
string is escaped (``html.escape``) and cut to a bounded length before it is shown.
"""

from __future__ import annotations

import html
import json
import reprlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from langgraph_durable.cli.common import common, open_saver, out
from langgraph_durable.cli.inspection import require_thread
from langgraph_durable.core.keys import SEP
from langgraph_durable.core.overview import Quarantined, quarantined, thread_overview
from langgraph_durable.core.reports import RecoveryReport, VerifyReport
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.ledger.entries import LedgerEntry
from langgraph_durable.saver import RedisSaver

MAX_SHOWN = 160  # characters of any stored text shown
MAX_PROBLEMS = 50  # verify's findings listed on the page
LANE, ROW, RADIUS = 240, 46, 9  # the drawing's grid (px)


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


@dataclass
class Timeline:
    thread_id: str
    points: list[Point] = field(default_factory=list)
    calls: list[LedgerEntry] = field(default_factory=list)
    quarantine: list[Quarantined] = field(default_factory=list)
    quarantined: int = 0  # how many records are in quarantine (``quarantine``: some of them)
    fallbacks: list[RecoveryReport] = field(default_factory=list)
    leased_to: str | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why


def gather(saver: RedisSaver, thread_id: str) -> Timeline:
    """Everything the page shows of ``thread_id``, read without writing anything."""
    found = Timeline(thread_id)
    report: VerifyReport = saver.verify(thread_id)
    for tup in saver.list({"configurable": {"thread_id": thread_id}}):
        conf = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        step = tup.metadata.get("step")
        found.points.append(
            Point(
                conf["checkpoint_id"],
                conf.get("checkpoint_ns", ""),
                step if isinstance(step, int) else None,
                parent,
                str(tup.metadata.get("source", "")),
                str(tup.checkpoint.get("ts", "")),
            )
        )
    listed = {p.checkpoint_id for p in found.points}
    reasons = {f.checkpoint_id: f.reason for f in report.findings if f.checkpoint_id}
    for cid in report.damaged_checkpoints:
        if cid not in listed:
            found.points.append(Point(cid, "", None, None, "", "", reasons.get(cid, "damaged")))
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
    except Exception as exc:  # noqa: BLE001 - as above
        found.problems.append(f"reading the ledger: {exc}")
    found.quarantined, found.quarantine = saver.drive(quarantined(saver.core.keys, thread_id))
    overview = saver.drive(thread_overview(saver.core.keys, thread_id))
    found.leased_to = overview.leased_to
    for what, counted in (
        ("checkpoint index", overview.checkpoints),
        ("ledger", overview.ledger_entries),
    ):
        if counted == "damaged":
            found.problems.append(f"the {what} key holds another type: run `verify --repair`")
    for finding in report.findings[:MAX_PROBLEMS]:  # what verify found, as it says it
        where = f" of checkpoint {finding.checkpoint_id}" if finding.checkpoint_id else ""
        found.problems.append(f"{finding.kind}{where} ({finding.field}): {finding.reason}")
    if len(report.findings) > MAX_PROBLEMS:
        found.problems.append(f"and {len(report.findings) - MAX_PROBLEMS} more: run `verify`")
    return found


# -- drawing ------------------------------------------------------------------------------
def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``value`` as escaped text of at most ``limit`` characters."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, default=str, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):  # stored: nested without end
            value = reprlib.repr(value)
    text = value.replace(SEP, " / ")
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return html.escape(text, quote=True)


def lanes(points: list[Point]) -> dict[str, int]:
    """A lane per branch: a checkpoint stays on its parent's lane, except the second and
    later children of a fork (by id, so by time), which open new lanes."""
    children: dict[str | None, list[Point]] = defaultdict(list)
    ids = {p.checkpoint_id for p in points}
    for point in sorted(points, key=lambda p: p.checkpoint_id):
        children[point.parent_id if point.parent_id in ids else None].append(point)
    lane_of: dict[str, int] = {}
    next_lane = 0
    stack = [(root, None) for root in reversed(children[None])]
    while stack:
        point, inherited = stack.pop()
        if inherited is None:
            inherited, next_lane = next_lane, next_lane + 1
        lane_of[point.checkpoint_id] = inherited
        kids = children.get(point.checkpoint_id, [])
        for index, kid in reversed(list(enumerate(kids))):
            stack.append((kid, inherited if index == 0 else None))
    return lane_of


def _svg(points: list[Point], forks: set[str], calls_at: dict[int, list[str]]) -> str:
    lane_of = lanes(points)
    # a row per step that has a checkpoint (stored steps say what they like: no gaps
    # drawn for them); damaged checkpoints (no step) go below
    row_of = {
        step: row for row, step in enumerate(sorted({p.step for p in points if p.step is not None}))
    }
    undrawn = len(row_of)
    labels = {p.checkpoint_id: _label(p, calls_at) for p in points}
    lane = max([LANE, *(40 + 8 * len(text) for text in labels.values())])  # no overlap

    def where(p: Point) -> tuple[int, int]:
        row = row_of[p.step] if p.step is not None else undrawn
        return 40 + lane_of.get(p.checkpoint_id, 0) * lane, 24 + row * ROW

    by_id = {p.checkpoint_id: p for p in points}
    parts = []
    for p in points:
        if p.parent_id in by_id:
            (x1, y1), (x2, y2) = where(by_id[p.parent_id]), where(p)
            parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" class="edge"/>')
    for p in points:
        x, y = where(p)
        kind = "damaged" if p.damaged else ("fork" if p.checkpoint_id in forks else "cp")
        parts.append(
            f'<g class="{kind}" data-checkpoint="{shown(p.checkpoint_id)}">'
            f'<circle cx="{x}" cy="{y}" r="{RADIUS}"/>'
            f'<text x="{x + 14}" y="{y + 4}">{shown(labels[p.checkpoint_id])}</text></g>'
        )
    width = 80 + (max(lane_of.values(), default=0) + 1) * lane
    height = 60 + (undrawn + 1) * ROW
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img">{"".join(parts)}</svg>'
    )


def _label(p: Point, calls_at: dict[int, list[str]]) -> str:
    """What a checkpoint's dot says: its step, the end of its id, the calls at its step."""
    said = f"step {p.step}" if p.step is not None else "damaged"
    said += f" \u00b7 {p.checkpoint_id[-8:]}"
    called = calls_at.get(p.step, []) if p.step is not None else []
    if called:
        said += f" \u00b7 {len(called)} calls: {', '.join(sorted(set(called)))}"
    return said[:MAX_SHOWN]


def _call_rows(calls: list[LedgerEntry]) -> str:
    rows = []
    for e in sorted(calls, key=lambda e: (e.checkpoint_ns, e.step, e.position)):
        kind = "model" if e.model_call else "tool"
        outcome = e.error if e.error else e.result
        decisions = "; ".join(
            f"#{slot} {d.action} by {d.by or '?'} at {_at(d.at)}: {d.reason or '-'}"
            for slot, d in sorted(e.decisions.items())
        )
        rows.append(
            f'<tr class="call {shown(e.state)}"><td>{shown(e.checkpoint_ns or "(root)")}</td>'
            f"<td>{shown(e.step)}</td><td>{kind}</td><td>{shown(e.name)}</td>"
            f"<td>{shown(e.state)}</td><td>{shown(e.args)}</td><td>{shown(outcome)}</td>"
            f"<td>{shown(e.attempts)}</td>"
            f"<td>{shown(', '.join(str(n) for n in e.escalations) or '-')}</td>"
            f"<td>{shown(decisions or e.resolution or '-')}</td><td>{_at(e.started_at)}</td></tr>"
        )
    return "".join(rows)


def _at(ts: float | None) -> str:
    if not isinstance(ts, int | float):
        return "-"
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "-"


STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.edge{stroke:#888;stroke-width:2} text{font:12px monospace;fill:#222}
.cp circle{fill:#3a7bd5} .fork circle{fill:#e69500} .damaged circle{fill:#d33}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 6px;
vertical-align:top;font-size:12px;max-width:360px;overflow-wrap:anywhere}
.bad{color:#b00} .note{color:#555}
"""


def render(t: Timeline) -> str:
    """The page for ``t``: HTML with inline CSS and SVG, nothing loaded from elsewhere."""
    children: dict[str, int] = defaultdict(int)
    for p in t.points:
        if p.parent_id:
            children[p.parent_id] += 1
    forks = {cid for cid, n in children.items() if n > 1}
    by_ns: dict[str, list[Point]] = defaultdict(list)
    for p in t.points:
        by_ns[p.checkpoint_ns].append(p)
    body = [
        f"<h1>Thread {shown(t.thread_id)}</h1>",
        (
            f'<p id="summary">{len(t.points)} checkpoints, {len(forks)} forks, '
            f"{sum(1 for p in t.points if p.damaged)} damaged, {t.quarantined} quarantined, "
            f"{len(t.calls)} recorded calls. Lease: "
            f'<span id="lease">{shown(t.leased_to or "not held")}</span></p>'
        ),
    ]
    for problem in t.problems:
        body.append(f'<p class="bad">{shown(problem, 400)}</p>')
    for report in t.fallbacks:
        skipped = ", ".join(f"{shown(s.checkpoint_id)} ({shown(s.reason)})" for s in report.skipped)
        body.append(
            f'<p class="bad fallback">Fallback in namespace '
            f"{shown(report.checkpoint_ns or '(root)')}: reads use "
            f"{shown(report.used_checkpoint_id or 'none')}, past {skipped}</p>"
        )
    for ns in sorted(by_ns):
        calls_at: dict[int, list[str]] = defaultdict(list)
        for call in t.calls:  # the root shows every call at its step; a subgraph its own
            if not ns or call.checkpoint_ns == ns:
                calls_at[call.step].append(call.name)
        body.append(f"<h2>Namespace {shown(ns or '(root)')}</h2>")
        body.append(_svg(by_ns[ns], forks, calls_at))
    if not t.points:
        body.append('<p class="note">No checkpoint.</p>')
    body.append("<h2>Tool and model calls</h2>")
    if t.calls:
        body.append(
            '<table id="calls"><tr><th>namespace</th><th>step</th><th>kind</th><th>name</th>'
            "<th>state</th><th>intent (arguments)</th><th>result or error</th>"
            "<th>attempts</th><th>escalations</th><th>decisions</th><th>started</th></tr>"
            f"{_call_rows(t.calls)}</table>"
        )
    else:
        body.append('<p class="note">No recorded call.</p>')
    body.append("<h2>Quarantined records</h2>")
    if len(t.quarantine) < t.quarantined:
        body.append(f'<p class="note">{len(t.quarantine)} of {t.quarantined} shown.</p>')
    if t.quarantine:
        rows = "".join(
            f'<tr class="quarantined"><td>{shown(q.kind)}</td><td>{shown(q.field)}</td>'
            f"<td>{shown(q.reason)}</td></tr>"
            for q in t.quarantine
        )
        body.append(
            f'<table id="quarantine"><tr><th>kind</th><th>record</th><th>why</th></tr>{rows}'
            "</table>"
        )
    else:
        body.append('<p class="note">None.</p>')
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Thread {shown(t.thread_id)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )


@click.command()
@common
@click.argument("thread")
@click.option(
    "--html",
    "html_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The page to write (one file, nothing loaded from elsewhere).",
)
def timeline(
    redis_url: str | None, key_prefix: str, as_json: bool, thread: str, html_path: Path
) -> None:
    """Picture THREAD in one HTML page: checkpoints by step and namespace with forks,
    damage, fallbacks and quarantine, the tool and model calls, the lease. Reads only."""
    with open_saver(redis_url, key_prefix) as saver:
        require_thread(saver, thread, key_prefix)
        found = gather(saver, thread)
    try:
        html_path.write_text(render(found), encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {html_path}: {exc.strerror}") from None
    data = {
        "file": str(html_path),
        "checkpoints": len(found.points),
        "damaged": sum(1 for p in found.points if p.damaged),
        "calls": len(found.calls),
        "quarantined": found.quarantined,
    }
    out(
        as_json,
        data,
        lambda: [f"wrote {html_path} ({data['checkpoints']} checkpoints, {data['calls']} calls)"],
    )
