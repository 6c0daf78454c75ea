"""``langgraph-durable doctor``: whether the Redis you have can keep the saver's promises
(``langgraph_durable.doctor``)."""

from __future__ import annotations

import sys
from dataclasses import asdict

import click

from langgraph_durable.cli.common import checked_url, common, out


@click.command()
@common
def doctor(redis_url: str | None, key_prefix: str, as_json: bool) -> None:
    """Check the Redis you have: server, mode, scripts (on a scratch thread, removed
    afterwards), persistence, eviction, replicas, permissions, latency, and which rows of
    the README's crash table hold there; exit 1 with a line per problem."""
    from langgraph_durable.doctor import check

    ctx = click.get_current_context()
    url = checked_url(redis_url)
    report = check(url, cluster=ctx.meta.get("lgd_cluster", False))
    data = {
        "url": report.url,
        "ok": report.ok,
        "checks": [asdict(c) for c in report.checks],
        "crash_table": [asdict(r) for r in report.crash_rows],
    }

    def lines() -> list[str]:
        width = max(len(c.name) for c in report.checks)
        text = [f"doctor: {report.url}"]
        for c in report.checks:
            why = f"  ({c.why})" if c.why else ""
            text.append(f"  {c.status.upper():<8}{c.name:<{width + 2}}{c.value}{why}")
        text.append("what survives which crash, on this server:")
        for row in report.crash_rows:
            mark = {True: "holds", False: "DOES NOT HOLD", None: "cannot tell"}[row.holds]
            text.append(f"  {mark:<14}{row.what}: {row.why}")
        text += [f"problem: {c.name}: {c.why or c.value}" for c in report.problems]
        return text

    out(as_json, data, lines)
    if not report.ok:
        sys.exit(1)
