"""Maintenance commands: ``verify`` (``--repair`` moves damage to quarantine and puts
lost index members back), ``acknowledge`` (closes an incident: the quarantine looked
at) and ``resign`` (completes a signing-key rotation)."""

from __future__ import annotations

import sys

import click

from langgraph_durable.cli.common import (
    SIGNING_KEY_ENV,
    common,
    open_saver,
    out,
    printable,
    thread_ids,
)
from langgraph_durable.core.overview import thread_exists


@click.command()
@common
@click.argument("thread", required=False)
@click.option("--all", "all_threads", is_flag=True, help="verify every thread")
@click.option(
    "--repair", is_flag=True, help="move what is damaged to the thread's quarantine, then verify"
)
def verify(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    thread: str | None,
    all_threads: bool,
    repair: bool,
) -> None:
    """Check every record of THREAD (or --all threads); exit 1 if anything is damaged or
    quarantined, or the thread does not exist. Changes nothing unless --repair."""
    from langgraph_durable.core.repair import repair as repair_plan

    if not thread and not all_threads:
        raise click.UsageError("name a THREAD or pass --all")
    data = []
    with open_saver(redis_url, key_prefix) as saver:
        targets = thread_ids(saver) if all_threads else [thread]
        if not targets:  # nothing to vouch for: not a success
            raise click.ClickException(f"no threads under key prefix {key_prefix!r}")
        with click.progressbar(targets, label="verifying", file=sys.stderr, show_pos=True) as bar:
            for thread_id in bar:
                if not saver.drive(thread_exists(saver.keys, thread_id)):
                    data.append({"thread_id": thread_id, "exists": False, "ok": False})
                    continue
                moved = saver.drive(repair_plan(saver.core, thread_id)) if repair else None
                r = saver.verify(thread_id)
                data.append(
                    {
                        "thread_id": r.thread_id,
                        "exists": True,
                        "ok": r.ok,
                        "intact": len(r.intact_checkpoints),
                        "damaged": r.damaged_checkpoints,
                        "records_checked": r.records_checked,
                        "findings": [vars(f) for f in r.findings],
                        "quarantined": r.quarantined,
                        **(
                            {
                                "moved": [list(m) for m in moved.moved],
                                "left": [list(m) for m in moved.left],
                                "reindexed": moved.reindexed,
                            }
                            if moved
                            else {}
                        ),
                    }
                )

    def lines() -> list[str]:
        text = []
        for r in data:
            name = r["thread_id"]
            if not r["exists"]:
                text.append(f"{name}: no such thread (key prefix {key_prefix!r})")
                continue
            for kind, field_, reason in r.get("moved", []):
                text.append(f"{name}: moved to quarantine: {kind} {_shown(field_)}: {reason}")
            for kind, field_, why in r.get("left", []):
                text.append(f"{name}: left in place: {kind} {_shown(field_)}: {why}")
            if r.get("reindexed"):
                text.append(f"{name}: put {r['reindexed']} intact records back into their index")
            status = "ok" if r["ok"] else "DAMAGED" if r["findings"] else "NOT OK"
            held = f", {r['quarantined']} records quarantined" if r["quarantined"] else ""
            text.append(f"{r['thread_id']}: {status} ({r['intact']} intact checkpoints{held})")
            text += [f"  {f['kind']} {_shown(f['field'])}: {f['reason']}" for f in r["findings"]]
        if all_threads:
            text.append(_summary(data, repair))
        return text

    out(as_json, data, lines)
    if not all(r["ok"] for r in data):
        sys.exit(1)


def _summary(data: list[dict], repair: bool) -> str:
    """``verify --all``'s last line: threads checked, ok, damaged (not ok), repaired
    (with --repair: threads it moved records of, or put records back for)."""
    ok = sum(r["ok"] for r in data)
    line = f"{len(data)} threads checked: {ok} ok, {len(data) - ok} damaged"
    if repair:
        repaired = sum(bool(r.get("moved") or r.get("reindexed")) for r in data)
        line += f", {repaired} repaired"
    return line


@click.command()
@common
@click.argument("thread")
@click.option("--reason", required=True, help="what was looked at, and what was done")
@click.option("--by", default=None, help="who acknowledges (default: $USER)")
def acknowledge(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    thread: str,
    reason: str,
    by: str | None,
) -> None:
    """Acknowledge everything THREAD's quarantine holds, once someone has looked at it:
    the decision (who, why, when, which records) goes into the thread's ledger, the
    records leave the quarantine, and verify reports the thread OK until the next
    damage."""
    import os

    by = by or os.environ.get("USER") or None
    with open_saver(redis_url, key_prefix) as saver:
        done = saver.acknowledge_quarantine(thread, reason=reason, by=by)
    data = {
        "thread_id": done.thread_id,
        "by": done.by,
        "reason": done.reason,
        "at": done.at,
        "records": [{"kind": k, "field": f, "damage": w} for k, f, w in done.records],
    }

    def lines() -> list[str]:
        said = f"acknowledged by {done.by or '?'}: {done.reason}"
        return [f"{done.thread_id}: {len(done.records)} quarantined records {said}"]

    out(as_json, data, lines)


def _shown(field_: str) -> str:
    """A hash field or index member for a terminal: its separators as spaces."""
    return field_.replace("\x00", " ")


@click.command()
@common
@click.argument("thread", required=False)
@click.option("--all", "all_threads", is_flag=True, help="re-sign every thread")
@click.option("--from-unsigned", is_flag=True, help="also sign records that carry only a checksum")
def resign(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    thread: str | None,
    all_threads: bool,
    from_unsigned: bool,
) -> None:
    """Rewrite the records of THREAD (or --all threads) under the newest signing key, to
    complete a key rotation; exit 1 if a record did not verify (it is left as it was)."""
    if not thread and not all_threads:
        raise click.UsageError("name a THREAD or pass --all")
    if not click.get_current_context().meta.get("lgd_signing_key"):
        raise click.UsageError(
            f"resign needs --signing-key, --signing-key-file or {SIGNING_KEY_ENV}"
        )
    with open_saver(redis_url, key_prefix) as saver:
        reports = saver.resign(None if all_threads else thread, from_unsigned=from_unsigned)
    if not reports and not as_json:
        click.echo(printable(f"no threads under key prefix {key_prefix!r}"))
    data = [
        {
            "thread_id": r.thread_id,
            "ok": r.ok,
            "resigned": r.resigned,
            "current": r.current,
            "skipped": [vars(f) for f in r.skipped],
        }
        for r in reports
    ]

    def lines() -> list[str]:
        text = []
        for r in data:
            text.append(
                f"{r['thread_id']}: {r['resigned']} records re-signed, {r['current']} already "
                f"current, {len(r['skipped'])} skipped"
            )
            text += [f"  {f['kind']} {_shown(f['field'])}: {f['reason']}" for f in r["skipped"]]
        return text

    out(as_json, data, lines)
    if not all(r["ok"] for r in data):
        sys.exit(1)
