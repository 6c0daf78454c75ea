"""Operators' commands: ``escalations`` (every call waiting for a human, across threads,
and the calls of rolled-back runs that may have taken effect), ``resolve`` (answer one,
with who and why; the thread's next run applies it) and ``drop`` (set a recorded model
answer, or an entry of a rolled-back run, aside, with who and why)."""

from __future__ import annotations

import sys
from typing import Any

import click

from langgraph_durable.cli.common import common, echo_error, open_saver, out_table
from langgraph_durable.core.errors import LeaseHeldError
from langgraph_durable.ledger import ToolLedger


@click.command()
@common
@click.option("--thread", "threads", multiple=True, help="only these threads (repeatable)")
def escalations(
    redis_url: str | None, key_prefix: str, as_json: bool, threads: tuple[str, ...]
) -> None:
    """Every tool call waiting for a human's answer, and every call of a rolled-back run
    that may have taken effect: thread, tool, why, idempotency key, age, run, arguments
    (without --thread, a SCAN of every thread)."""
    with open_saver(redis_url, key_prefix) as saver:
        found = ToolLedger(saver).escalations(list(threads) or None)
    rows = [
        {
            "thread_id": e.thread_id,
            "name": e.name,
            "kind": e.kind,
            "args": e.args,
            "idempotency_key": e.idempotency_key,
            "age_seconds": round(e.age_seconds, 1) if e.age_seconds is not None else None,
            "run_id": e.entry.run_id,
        }
        for e in found
    ]
    out_table(
        as_json,
        rows,
        [
            ("THREAD", lambda r: r["thread_id"]),
            ("TOOL", lambda r: r["name"]),
            ("WHY", lambda r: r["kind"].replace("tool_", "").replace("_", " ")),
            ("IDEMPOTENCY KEY", lambda r: r["idempotency_key"]),
            ("AGE", lambda r: _age(r["age_seconds"])),
            ("RUN", lambda r: r["run_id"] or "-"),
            ("ARGS", lambda r: str(r["args"])[:60]),
        ],
        empty=(
            f"no escalations in {'thread' if len(threads) == 1 else 'threads'} "
            + ", ".join(repr(t) for t in threads)
            + f" (key prefix {key_prefix!r})"
            if threads
            else f"no escalations under key prefix {key_prefix!r}"
        ),
    )


@click.command()
@common
@click.argument("thread")
@click.argument("call", metavar="IDEMPOTENCY_KEY")
@click.option(
    "--skip", "skip", metavar="RESULT", help="it took effect: record RESULT as its output"
)
@click.option("--retry", is_flag=True, help="it did not take effect: run it again (same key)")
@click.option("--fail", is_flag=True, help="fail it: the graph raises")
@click.option("--reason", help="why (recorded with the decision)")
@click.option("--by", "by", help="who decides (recorded with the decision)")
def resolve(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    thread: str,
    call: str,
    skip: str | None,
    retry: bool,
    fail: bool,
    reason: str | None,
    by: str | None,
) -> None:
    """Answer the waiting call IDEMPOTENCY_KEY of THREAD; its next run applies the answer
    without asking again (answer a call one way: this, or Command(resume=...))."""
    chosen = [
        a for a, given in (("skip", skip is not None), ("retry", retry), ("fail", fail)) if given
    ]
    if len(chosen) != 1:
        _bad_input("give exactly one of --skip RESULT, --retry, --fail")
    if chosen == ["fail"] and not reason:
        _bad_input("--fail needs --reason TEXT")
    with open_saver(redis_url, key_prefix) as saver:
        try:
            entry = ToolLedger(saver).resolve(
                thread, call, chosen[0], result=skip, reason=reason, by=by
            )
        except LeaseHeldError as exc:
            echo_error(
                f"thread {thread!r} is held by a worker ({exc}); resolve it once that worker "
                "has stopped"
            )
            sys.exit(2)
    out_table(
        as_json,
        [{"thread_id": thread, "name": entry.name, "idempotency_key": call, "action": chosen[0]}],
        [("RESOLVED", lambda r: f"{r['name']} {r['idempotency_key']}: {r['action']}")],
    )


@click.command()
@common
@click.argument("thread")
@click.argument("call", metavar="IDEMPOTENCY_KEY")
@click.option("--reason", required=True, help="why (recorded with the drop)")
@click.option("--by", "by", help="who drops it (recorded with the drop)")
def drop(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    thread: str,
    call: str,
    reason: str,
    by: str | None,
) -> None:
    """Drop the recorded model answer IDEMPOTENCY_KEY of THREAD (the next attempt at its
    place asks the model again), or a call of a rolled-back run (it leaves
    `escalations`). The entry keeps its result and the drop (who, why, when)."""
    with open_saver(redis_url, key_prefix) as saver:
        try:
            entry = ToolLedger(saver).drop(thread, call, reason=reason, by=by)
        except LeaseHeldError as exc:
            echo_error(
                f"thread {thread!r} is held by a worker ({exc}); drop it once that worker "
                "has stopped"
            )
            sys.exit(2)
    out_table(
        as_json,
        [{"thread_id": thread, "name": entry.name, "idempotency_key": call, "dropped": True}],
        [("DROPPED", lambda r: f"{r['name']} {r['idempotency_key']}")],
    )


def _age(seconds: Any) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _bad_input(message: str) -> None:
    echo_error(f"bad input: {message}")
    sys.exit(2)
