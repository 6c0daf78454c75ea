"""Inspection commands: ``threads``, ``history``, ``show``, ``ledger``. They never write.
An empty listing is one line saying so (``--json``: ``[]``)."""

from __future__ import annotations

import json
from typing import Any

import click

from langgraph_durable.cli.common import (
    common,
    open_saver,
    out,
    out_table,
    thread_ids,
    when,
)
from langgraph_durable.core.errors import (
    CheckpointCorruptedError,
    UnreadableThreadError,
)
from langgraph_durable.core.overview import thread_exists, thread_overview
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.ledger.entries import MODEL_POSITION
from langgraph_durable.saver import RedisSaver


@click.command()
@common
def threads(redis_url: str | None, key_prefix: str, as_json: bool) -> None:
    """Every thread with checkpoints: newest step and time, checkpoints, ledger entries."""
    with open_saver(redis_url, key_prefix) as saver:
        rows = []
        for thread_id in thread_ids(saver):
            unreadable = None
            try:
                latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
            except UnreadableThreadError as exc:  # e.g. signed, and no --signing-key
                latest, unreadable = None, str(exc)
            seen = saver.drive(thread_overview(saver.keys, thread_id))
            rows.append(
                {
                    "thread_id": thread_id,
                    "unreadable": unreadable,
                    "step": latest.metadata.get("step") if latest else None,
                    "updated": latest.checkpoint["ts"] if latest else None,
                    "checkpoints": seen.checkpoints,
                    "ledger_entries": seen.ledger_entries,
                    "leased_to": seen.leased_to,
                }
            )
    out_table(
        as_json,
        rows,
        [
            ("THREAD", lambda r: r["thread_id"]),
            ("STEP", lambda r: "unreadable" if r["unreadable"] else r["step"]),
            ("UPDATED", lambda r: when(r["updated"])),
            ("CHECKPOINTS", lambda r: r["checkpoints"]),
            ("LEDGER", lambda r: r["ledger_entries"]),
            ("LEASED TO", lambda r: r["leased_to"] or "-"),
        ],
        empty=f"no threads under key prefix {key_prefix!r}",
    )


def require_thread(saver: RedisSaver, thread: str, key_prefix: str) -> None:
    """Exit 1 naming the thread when Redis holds no key of it (a typo, another prefix)."""
    if not saver.drive(thread_exists(saver.keys, thread)):
        raise click.ClickException(f"no such thread {thread!r} (key prefix {key_prefix!r})")


@click.command()
@common
@click.argument("thread")
def history(redis_url: str | None, key_prefix: str, as_json: bool, thread: str) -> None:
    """The checkpoints of THREAD, newest first."""
    with open_saver(redis_url, key_prefix) as saver:
        rows = [
            {
                "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                "checkpoint_ns": t.config["configurable"]["checkpoint_ns"],
                "step": t.metadata.get("step"),
                "source": t.metadata.get("source"),
                "created": t.checkpoint["ts"],
                "pending_writes": len(t.pending_writes or []),
            }
            for t in saver.list({"configurable": {"thread_id": thread}})
        ]
        if not rows:
            require_thread(saver, thread, key_prefix)
    out_table(
        as_json,
        rows,
        [
            ("STEP", lambda r: r["step"]),
            ("CHECKPOINT", lambda r: r["checkpoint_id"]),
            ("SOURCE", lambda r: r["source"]),
            ("CREATED", lambda r: when(r["created"])),
            ("WRITES", lambda r: r["pending_writes"]),
        ],
        empty=f"no checkpoints in thread {thread!r} (key prefix {key_prefix!r})",
    )


@click.command()
@common
@click.argument("thread")
@click.argument("checkpoint", required=False)
def show(
    redis_url: str | None, key_prefix: str, as_json: bool, thread: str, checkpoint: str | None
) -> None:
    """The state of THREAD at its newest (or the given) CHECKPOINT."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if checkpoint:
        config["configurable"]["checkpoint_id"] = checkpoint
    with open_saver(redis_url, key_prefix) as saver:
        try:
            found = saver.get_tuple(config)
        except CheckpointCorruptedError as exc:  # damage (or a refused type), not a traceback
            raise click.ClickException(
                f"checkpoint {exc.checkpoint_id} of thread {thread!r} is damaged: {exc.reason}"
            ) from None
        except UnreadableThreadError as exc:
            raise click.ClickException(str(exc)) from None
        report = saver.recovery_report(thread)
        if found is None:
            require_thread(saver, thread, key_prefix)
    if found is None and checkpoint:  # the thread exists; this checkpoint of it does not
        raise click.ClickException(
            f"unknown checkpoint {checkpoint!r}: thread {thread!r} exists (key prefix "
            f"{key_prefix!r}) but has no such checkpoint; `history` lists its checkpoints"
        )
    if found is None and report and report.skipped:
        raise click.ClickException(
            f"no checkpoint of thread {thread!r} verifies; skipped "
            + "; ".join(f"{s.checkpoint_id}: {s.reason}" for s in report.skipped)
        )
    if found is None:
        raise click.ClickException(f"no checkpoint for thread {thread!r}")
    values = found.checkpoint["channel_values"]
    data = {
        "checkpoint_id": found.config["configurable"]["checkpoint_id"],
        "step": found.metadata.get("step"),
        "created": found.checkpoint["ts"],
        "values": {k: _summary(v) for k, v in values.items() if not k.startswith("branch:")},
        "pending_writes": [[w[0], w[1]] for w in found.pending_writes or []],
        "skipped_damaged": [[s.checkpoint_id, s.reason] for s in report.skipped] if report else [],
    }

    def lines() -> list[str]:
        text = [f"checkpoint {data['checkpoint_id']}  step {data['step']}  {when(data['created'])}"]
        for cid, reason in data["skipped_damaged"]:
            text.append(f"  (skipped damaged checkpoint {cid}: {reason})")
        for key, value in data["values"].items():
            text.append(f"{key}:")
            text += [f"  {item}" for item in (value if isinstance(value, list) else [value])]
        if data["pending_writes"]:
            text.append(f"pending writes: {len(data['pending_writes'])}")
        return text

    out(as_json, data, lines)


def _summary(value: Any) -> Any:
    if isinstance(value, list):
        return [_summary(v) for v in value]
    if hasattr(value, "type") and hasattr(value, "content"):  # a message
        calls = getattr(value, "tool_calls", None)
        text = f"{value.type}: {str(value.content)[:80]}"
        if calls:
            text += "  -> " + ", ".join(f"{c['name']}({json.dumps(c['args'])})" for c in calls)
        return text
    return value if isinstance(value, (str, int, float, bool, type(None), dict)) else repr(value)


@click.command()
@common
@click.argument("thread")
def ledger(redis_url: str | None, key_prefix: str, as_json: bool, thread: str) -> None:
    """The ledger of THREAD: every recorded tool call and model answer, its outcome, the
    run and the branch (execution) that recorded it."""
    from langgraph_durable.core import incidents

    with open_saver(redis_url, key_prefix) as saver:
        entries = ToolLedger(saver).entries(thread)
        acknowledged = saver.drive(incidents.acknowledgements(saver.core, thread))
        if not entries and not acknowledged:
            require_thread(saver, thread, key_prefix)
    rows = [
        {
            "step": e.step,
            "position": e.position,
            "tool": e.name,
            "state": e.state,
            "run_id": e.run_id,
            "execution": e.execution,
            "rolled_back": e.rolled_back,
            "settled": e.settled if e.model_call else None,
            "replays": e.replays,
            "drops": [
                {"by": by, "reason": why, "at": at, "what": what} for by, why, at, what in e.drops
            ],
            "attempts": e.attempts,
            "resolution": e.resolution,
            "idempotency_key": e.idempotency_key,
            "args": e.args,
            "result": _summary(getattr(e.result, "content", e.result)),
            "damage": e.damage,
            "decisions": [
                {"action": d.action, "by": d.by, "reason": d.reason, "at": d.at}
                for d in e.decisions.values()
            ],
        }
        for e in entries
    ] + [_acknowledgement_row(a) for a in acknowledged]
    out_table(
        as_json,
        rows,
        [
            ("STEP", lambda r: r["step"]),
            ("#", lambda r: _position(r["position"])),
            ("CALL", lambda r: r["tool"]),
            ("STATE", lambda r: _state(r)),
            ("RUN", lambda r: r["run_id"] or "-"),
            ("BRANCH", lambda r: _branch(r["execution"])),
            ("ATTEMPTS", lambda r: r["attempts"]),
            ("HUMAN", lambda r: _human(r)),
            ("IDEMPOTENCY KEY", lambda r: r["idempotency_key"]),
            ("RESULT", lambda r: str(r["result"])[:40]),
        ],
        empty=f"no ledger entries in thread {thread!r} (key prefix {key_prefix!r})",
    )


def _acknowledgement_row(a: Any) -> dict[str, Any]:
    """An operator's acknowledgement of the quarantine, as a row among the calls."""
    records = [{"kind": k, "field": f, "damage": w} for k, f, w in a.records]
    return {
        "step": "-",
        "position": 0,
        "tool": "quarantine",
        "state": "acknowledged" if a.damage is None else "damaged",
        "run_id": None,
        "execution": "",
        "rolled_back": False,
        "settled": None,
        "replays": 0,
        "drops": [],
        "attempts": 0,
        "resolution": None,
        "idempotency_key": None,
        "args": None,
        "result": f"{len(records)} records acknowledged",
        "damage": a.damage,
        "decisions": [{"action": "acknowledge", "by": a.by, "reason": a.reason, "at": a.at}],
        "acknowledged_records": records,
    }


def _position(position: int) -> int:
    """A model answer's order in its task (it is stored far above any tool call's)."""
    return position - MODEL_POSITION if position >= MODEL_POSITION else position


def _state(row: dict[str, Any]) -> str:
    state = str(row["state"])
    if row["rolled_back"]:
        state += " (rolled back)"
    if row["settled"] is False:
        state += " (unsettled)"
    return state


def _branch(execution: str) -> str:
    """The execution, by the end of the checkpoint id it started from (uuid6 ids share
    their first half with their neighbours)."""
    head, dot, count = execution.partition(".")
    return (head[-8:] + dot + count) if head else "-"


def _human(row: dict[str, Any]) -> str:
    """How a human answered: through the graph, or an operator's decision (who, why)."""
    decided = [
        f"{d['action']} by {d['by'] or '?'}" + (f": {d['reason']}" if d["reason"] else "")
        for d in row["decisions"]
    ]
    dropped = [f"dropped by {d['by'] or '?'}: {d['reason']}" for d in row["drops"]]
    return "; ".join(decided + dropped) or row["resolution"] or "-"
