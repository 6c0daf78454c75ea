"""``migrate``: copy every thread of another checkpointer into Redis, then verify it.

Owns the command: the source string (``sources.open_source``), a progress bar over the
threads on stderr, a summary (text or ``--json``), exit code 1 when a thread differs
from its source, and one line on stderr (exit 2) when the source or Redis fails halfway:
running the same command again continues where it stopped (``migration.py``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from langgraph_durable.cli.common import (
    UNREACHABLE,
    common,
    echo_error,
    open_saver,
    out,
    printable,
)
from langgraph_durable.core import reply_codes
from langgraph_durable.core.redact import redact, redact_url
from langgraph_durable.core.reports import ThreadMigration
from langgraph_durable.tools.migration import migrate_thread, source_thread_ids, why_it_stopped
from langgraph_durable.tools.sources import open_source


@click.command()
@common
@click.option(
    "--from",
    "source",
    required=True,
    metavar="SOURCE",
    help="postgresql://..., sqlite:///path (or the path of a SQLite file), or module:factory "
    "(a callable returning a checkpointer or a context manager of one)",
)
@click.option(
    "--thread",
    "thread_ids",
    multiple=True,
    metavar="THREAD",
    help="copy only this thread (repeat); default: every thread of the source",
)
@click.option("--no-verify", is_flag=True, help="do not compare the threads with the source")
@click.option(
    "--allow-type",
    "allowed",
    multiple=True,
    metavar="MODULE:NAME",
    callback=lambda _ctx, _param, value: tuple(_type_name(v) for v in value),
    help="a type of your state to construct from the source's rows besides LangGraph's "
    "safe types (repeat); a row naming any other type stops the migration",
)
def migrate(
    redis_url: str | None,
    key_prefix: str,
    as_json: bool,
    source: str,
    thread_ids: tuple[str, ...],
    no_verify: bool,
    allowed: tuple[tuple[str, str], ...],
) -> None:
    """Copy every thread of SOURCE (its whole history, pending writes and metadata) into
    Redis, then compare each with the source. Exit 1 if a thread differs. Interrupted?
    Run it again: what is in Redis already is skipped."""
    results: list[ThreadMigration] = []
    with (
        open_source(source, allowed) as src,
        open_saver(redis_url, key_prefix, allowed) as saver,
    ):
        current = None
        try:
            ids = list(thread_ids) or source_thread_ids(src)
            with click.progressbar(
                ids, label="migrating", file=sys.stderr, show_pos=True, item_show_func=_shown
            ) as bar:
                for current in bar:
                    results.append(migrate_thread(src, saver, current, verify=not no_verify))
        except Exception as exc:  # the source's own errors (psycopg, sqlite3...): one line
            if isinstance(exc, UNREACHABLE) or reply_codes.is_auth_refusal(exc):
                raise  # the command group says it in one line, with the Redis URL
            where = f" at thread {current!r}" if current is not None else ""
            first = next(iter(str(exc).splitlines()), "")  # psycopg appends the SQL
            text = " ".join(f"{type(exc).__name__}: {first}".split())
            echo_error(f"migration stopped{where}: {redact(text, source)} ({why_it_stopped(exc)})")
            sys.exit(2)
    data = {
        "source": redact_url(source),
        "ok": all(r.ok for r in results),
        "threads": [{**dataclasses.asdict(r), "ok": r.ok} for r in results],
    }
    out(as_json, data, lambda: _lines(data, verified=not no_verify))
    if not data["ok"]:
        sys.exit(1)


def _type_name(text: str) -> tuple[str, str]:
    module, _, name = text.partition(":")
    if not (module and name):
        raise click.BadParameter(f"expected MODULE:NAME, got {text!r}")
    return module, name


def _shown(thread_id: str | None) -> str:
    """The progress bar's current thread: a source's thread id, shown on stderr."""
    return printable(thread_id or "")


def _lines(data: dict[str, Any], *, verified: bool) -> list[str]:
    threads = data["threads"]
    total = {k: sum(t[k] for t in threads) for k in ("copied", "already_there", "writes")}
    text = [
        f"{len(threads)} threads from {data['source']}: {total['copied']} checkpoints copied, "
        + f"{total['already_there']} already in Redis, {total['writes']} pending writes copied"
    ]
    for t in threads:
        text += [f"{t['thread_id']}: {m}" for m in t["mismatches"]]
    if verified:
        wrong = sum(not t["ok"] for t in threads)
        text.append(f"verified: {len(threads) - wrong} threads equal to the source, {wrong} differ")
    return text
