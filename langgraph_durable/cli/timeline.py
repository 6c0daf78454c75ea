"""``langgraph-durable timeline THREAD --html FILE``: one self-contained page picturing a thread.

Owns drawing what ``timeline_data.gather`` found (``render``: a pure function of a
``Timeline``). The page has no script and loads nothing: inline CSS and inline SVG only.
It tells what happened, first as a story (resumes after a gap and the steps that ran
again, damage and where reads fall back to, questions asked and their answers,
acknowledgements), then per namespace the checkpoints by step with their time, nodes and
run, their branches (a checkpoint with more than one child is a fork; each child after
the first opens a lane), damaged and quarantined checkpoints on their lane at their step
with a dashed line to where reads fall back, then the tool and model calls (intent,
result as its content, attempts, questions and operators' decisions), the quarantined
records and the lease. Every stored string is escaped (``html.escape``) and cut to a
bounded length before it is shown; no word is broken across lines (wide tables scroll).
"""

from __future__ import annotations

import html
import json
import reprlib
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from langgraph_durable.cli.common import common, open_saver, out
from langgraph_durable.cli.inspection import require_thread
from langgraph_durable.cli.timeline_data import (
    Point,
    Timeline,
    gather,
    graph_of_call,
    graph_of_checkpoint,
    seconds_of,
)
from langgraph_durable.core.keys import SEP
from langgraph_durable.ledger.entries import DIVERGED, LedgerEntry

__all__ = ["MAX_SHOWN", "Point", "Timeline", "gather", "render", "timeline"]

MAX_SHOWN = 160  # characters of any stored text shown
LANE, ROW, RADIUS = 240, 46, 9  # the drawing's grid (px)


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
    # drawn for them); checkpoints of no known step go below
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
            kind = "fallback" if p.damaged else ("gap" if p.gap_s is not None else "edge")
            parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" class="{kind}"/>')
    for p in points:
        x, y = where(p)
        kind = "damaged" if p.damaged else ("fork" if p.checkpoint_id in forks else "cp")
        kind += " resumed" if p.gap_s is not None else ""
        kind += " ran-again" if p.ran_again else ""
        parts.append(
            f'<g class="{kind}" data-checkpoint="{shown(p.checkpoint_id)}">'
            f'<circle cx="{x}" cy="{y}" r="{RADIUS}"/>'
            f'<text x="{x + 14}" y="{y + 4}">{shown(labels[p.checkpoint_id], 300)}</text></g>'
        )
    width = 80 + (max(lane_of.values(), default=0) + 1) * lane
    height = 60 + (undrawn + 1) * ROW
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img">{"".join(parts)}</svg>'
    )


def _label(p: Point, calls_at: dict[int, list[str]]) -> str:
    """What a checkpoint's dot says: its step, time, nodes, run and id; what befell it."""
    said = [f"step {p.step}" if p.step is not None else "step ?", _clock(p.created)]
    if p.nodes:
        said.append(", ".join(_node(n) for n in p.nodes)[:60])
    if p.run_id:
        said.append(f"run {p.run_id[-8:]}")
    said.append(p.checkpoint_id[-8:])
    if p.damaged:
        said.append(f"DAMAGED ({p.damaged[:60]})")
        said.append(
            f"reads fall back to {p.falls_back_to[-8:]}" if p.falls_back_to else "no fallback"
        )
    if p.gap_s is not None:
        said.append(f"resumed after {_duration(p.gap_s)}")
    if p.ran_again:
        said.append("ran again")
    called = calls_at.get(p.step, []) if p.step is not None and not p.damaged else []
    if called:
        said.append(f"{len(called)} calls: {', '.join(sorted(set(called)))}")
    return " \u00b7 ".join(said)


def _node(name: str) -> str:
    return "input" if name in ("__start__", "__input__") else name


def _clock(created: str) -> str:
    at = seconds_of(created)
    if at is None:
        return "time ?"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def readable(value: Any) -> Any:
    """A recorded result as what it says: a message's content (and the calls an AI
    message asks for), a create_agent response's messages; anything else as stored."""
    if isinstance(value, dict) and isinstance(value.get("result"), list):
        return " / ".join(str(readable(m)) for m in value["result"])
    content = getattr(value, "content", None)
    if content is None:
        return value
    calls = [c.get("name") for c in getattr(value, "tool_calls", None) or [] if isinstance(c, dict)]
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return f"{text} (asks for {', '.join(map(str, calls))})" if calls else text


def asked(e: LedgerEntry) -> str:
    """The questions a call put to a human, as what they were and how each was answered."""
    if not e.escalations:
        return "-"
    what = "a diverged call" if e.state == DIVERGED or e.diverged_from else "outcome unknown"
    said = []
    last = e.escalations[-1]
    for slot in e.escalations:
        decision = e.decisions.get(slot)
        if decision is not None:
            answer = f"{decision.action} by {decision.by or '?'}"
        elif slot == last and e.resolution:
            answer = f"answered {e.resolution}"
        elif slot == e.escalation:
            answer = "waiting for an answer"
        else:
            answer = "answered"
        said.append(f"asked #{slot} ({what}): {answer}")
    return "; ".join(said)


def _call_rows(calls: list[LedgerEntry]) -> str:
    rows = []
    for e in sorted(calls, key=lambda e: (e.checkpoint_ns, e.step, e.position)):
        kind = "model" if e.model_call else "tool"
        outcome = e.error if e.error else readable(e.result)
        decisions = "; ".join(
            f"#{slot} {d.action} by {d.by or '?'} at {_at(d.at)}: {d.reason or '-'}"
            for slot, d in sorted(e.decisions.items())
        )
        rows.append(
            f'<tr class="call {shown(e.state)}"><td>{shown(e.checkpoint_ns or "(root)")}</td>'
            f"<td>{shown(e.step)}</td><td>{kind}</td><td>{shown(e.name)}</td>"
            f"<td>{shown(e.state)}</td><td>{shown(e.args)}</td><td>{shown(outcome)}</td>"
            f'<td>{shown(e.attempts)}</td><td class="asked">{shown(asked(e))}</td>'
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


def _story(t: Timeline) -> list[tuple[float, str]]:
    """What happened, each as (when, sentence), for the list at the top of the page."""
    told: list[tuple[float, str]] = []
    for p in t.points:
        at = seconds_of(p.created) or 0.0
        where = f"step {p.step if p.step is not None else '?'}"
        by = f" in worker {p.went_on}" if p.went_on else ""
        if p.gap_s is not None:
            again = f", and ran again{by}" if p.ran_again else ""
            nodes = ", ".join(map(_node, p.nodes)) or "?"
            sentence = (
                f"{where} ({nodes}) was written {_duration(p.gap_s)} after the step before "
                f"it: the run stopped there (a crash, or a wait) and went on{again}"
            )
            told.append((at, sentence))
        elif p.ran_again:
            told.append(
                (
                    at,
                    f"{where} ran again{by}: a call of it ran more than once or was asked about",
                )
            )
        if p.damaged:
            back = f"checkpoint {p.falls_back_to}" if p.falls_back_to else "nothing"
            told.append(
                (
                    at,
                    f"checkpoint {p.checkpoint_id} ({where}) is {p.damaged}: reads fall back to {back}",
                )
            )
    for e in t.calls:
        if e.escalations:
            told.append((e.started_at or 0.0, f"{e.name} at step {e.step}: {asked(e)}"))
    for a in t.acknowledgements:
        told.append(
            (
                a.at,
                f"{len(a.records)} quarantined records acknowledged by {a.by or '?'}: {a.reason}",
            )
        )
    return sorted(told, key=lambda item: item[0])


STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.edge{stroke:#888;stroke-width:2} .gap{stroke:#d33;stroke-width:2;stroke-dasharray:6 4}
.fallback{stroke:#d33;stroke-width:1.5;stroke-dasharray:2 3}
text{font:12px monospace;fill:#222} .resumed text,.ran-again text{fill:#a40}
.cp circle{fill:#3a7bd5} .fork circle{fill:#e69500} .damaged circle{fill:#d33}
.damaged text{fill:#b00}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 6px;
vertical-align:top;font-size:12px;overflow-wrap:normal;word-break:normal;hyphens:none}
th{white-space:nowrap}
.bad{color:#b00} .note{color:#555}
"""


def render(t: Timeline) -> str:
    """The page for ``t``: HTML with inline CSS and SVG, nothing loaded from elsewhere."""
    children: dict[str, int] = defaultdict(int)
    for p in t.points:
        if p.parent_id and not p.damaged:
            children[p.parent_id] += 1
    forks = {cid for cid, n in children.items() if n > 1}
    by_ns: dict[str, list[Point]] = defaultdict(list)
    for p in t.points:
        by_ns[p.checkpoint_ns].append(p)
    resumes = sum(1 for p in t.points if p.gap_s is not None)
    body = [
        f"<h1>Thread {shown(t.thread_id)}</h1>",
        (
            f'<p id="summary">{len(t.points)} checkpoints, {len(forks)} forks, '
            f"{sum(1 for p in t.points if p.damaged)} damaged, {t.quarantined} quarantined, "
            f"{resumes} resumed after a gap, {len(t.calls)} recorded calls. Lease: "
            f'<span id="lease">{shown(t.leased_to or "not held")}</span></p>'
        ),
    ]
    story = _story(t)
    if story:
        items = "".join(f"<li>{_clock_of(at)}: {shown(text, 400)}</li>" for at, text in story)
        body.append(f'<h2>What happened</h2><ol id="story">{items}</ol>')
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
        for call in t.calls:  # the root shows its own tasks' calls; a subgraph its own
            if graph_of_call(call.checkpoint_ns) == graph_of_checkpoint(ns):
                calls_at[call.step].append(call.name)
        body.append(f"<h2>Namespace {shown(ns or '(root)')}</h2>")
        body.append(f'<div class="scroll">{_svg(by_ns[ns], forks, calls_at)}</div>')
    if not t.points:
        body.append('<p class="note">No checkpoint.</p>')
    body.append("<h2>Tool and model calls</h2>")
    if t.calls:
        body.append(
            '<div class="scroll"><table id="calls"><tr><th>namespace</th><th>step</th>'
            "<th>kind</th><th>name</th><th>state</th><th>intent (arguments)</th>"
            "<th>result or error</th><th>attempts</th><th>questions asked</th>"
            f"<th>decisions</th><th>started</th></tr>{_call_rows(t.calls)}</table></div>"
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
            '<div class="scroll"><table id="quarantine"><tr><th>kind</th><th>record</th>'
            f"<th>why</th></tr>{rows}</table></div>"
        )
    else:
        body.append('<p class="note">None.</p>')
    for a in t.acknowledgements:
        body.append(
            f'<p class="acknowledged">Acknowledged by {shown(a.by or "?")} at {_at(a.at)}: '
            f"{shown(a.reason)} ({len(a.records)} records)</p>"
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Thread {shown(t.thread_id)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )


def _clock_of(at: float) -> str:
    if not at:
        return "?"
    return datetime.fromtimestamp(at, timezone.utc).strftime("%H:%M:%S")


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
