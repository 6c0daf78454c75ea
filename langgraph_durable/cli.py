"""The ``langgraph-durable`` command line: the demo, inspection, verification, the server.

Every command takes ``--redis-url`` (default ``REDIS_URL``, else the embedded server in
``./.langgraph-durable/``, started if needed), ``--cluster``, ``--key-prefix`` and ``--json``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click

from langgraph_durable.embedded import DEFAULT_DATA_DIR, EmbeddedRedis, resolve_url
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.saver import RedisSaver


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url, --cluster, --key-prefix and --json on every command."""

    @click.option(
        "--redis-url",
        envvar="REDIS_URL",
        default=None,
        help="Redis URL (default: REDIS_URL, else the embedded server)",
    )
    @click.option(
        "--cluster", is_flag=True, envvar="LGD_CLUSTER", help="the URL is a Redis Cluster node"
    )
    @click.option("--key-prefix", default="lgd", show_default=True, help="the savers' key_prefix")
    @click.option("--json", "as_json", is_flag=True, help="machine-readable output")
    @functools.wraps(fn)
    def wrapper(*args: Any, cluster: bool, **kwargs: Any) -> Any:
        click.get_current_context().meta["lgd_cluster"] = cluster  # read by open_saver
        return fn(*args, **kwargs)

    return wrapper


@contextmanager
def open_saver(redis_url: str | None, key_prefix: str) -> Iterator[RedisSaver]:
    cluster = click.get_current_context().meta.get("lgd_cluster", False)
    with RedisSaver.from_conn_string(
        resolve_url(redis_url), key_prefix=key_prefix, cluster=cluster
    ) as saver:
        yield saver


def out(as_json: bool, data: Any, lines: Callable[[], list[str]]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        for line in lines():
            click.echo(line)


def out_table(
    as_json: bool, rows: list[dict[str, Any]], columns: list[tuple[str, Callable[[dict], Any]]]
) -> None:
    """``rows`` as JSON, or as a text table of ``columns`` (header, cell of a row)."""

    def lines() -> list[str]:
        cells = [[h for h, _ in columns]] + [[str(cell(r)) for _, cell in columns] for r in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
        return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]

    out(as_json, rows, lines)


def when(ts: str | None) -> str:
    if not ts:
        return "-"
    return datetime.fromisoformat(ts).strftime("%Y-%m-%d %H:%M:%S")


def thread_ids(saver: RedisSaver) -> list[str]:
    return saver._drive(saver.core._all_thread_ids())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """langgraph-durable: a crash-safe LangGraph checkpointer on Redis."""


@cli.command()
@common
@click.option("--damage", is_flag=True, help="damage the newest checkpoint before resuming")
@click.option("--delay", type=float, default=0.5, show_default=True, help="tool latency (s)")
def demo(redis_url: str | None, key_prefix: str, as_json: bool, damage: bool, delay: float) -> None:
    """Kill an agent with SIGKILL mid-run, resume it, check effects happened exactly once."""
    from langgraph_durable.demo import run_demo

    emit = (lambda line: None) if as_json else click.echo
    verdict = run_demo(
        resolve_url(redis_url), prefix=key_prefix, damage=damage, delay=delay, emit=emit
    )
    if as_json:
        click.echo(json.dumps(verdict, indent=2))
    sys.exit(0 if verdict["exactly_once"] else 1)


@cli.command()
@common
def threads(redis_url: str | None, key_prefix: str, as_json: bool) -> None:
    """Every thread with checkpoints: newest step and time, checkpoints, ledger entries."""
    with open_saver(redis_url, key_prefix) as saver:
        rows = []
        for thread_id in thread_ids(saver):
            latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
            tk = saver.keys.thread(thread_id)
            rows.append(
                {
                    "thread_id": thread_id,
                    "step": latest.metadata.get("step") if latest else None,
                    "updated": latest.checkpoint["ts"] if latest else None,
                    "checkpoints": saver.client.zcard(tk.cps),
                    "ledger_entries": saver.client.zcard(tk.lgx),
                    "leased_to": _holder(saver.client.get(tk.lease)),
                }
            )
    out_table(
        as_json,
        rows,
        [
            ("THREAD", lambda r: r["thread_id"]),
            ("STEP", lambda r: r["step"]),
            ("UPDATED", lambda r: when(r["updated"])),
            ("CHECKPOINTS", lambda r: r["checkpoints"]),
            ("LEDGER", lambda r: r["ledger_entries"]),
            ("LEASED TO", lambda r: r["leased_to"] or "-"),
        ],
    )


def _holder(lease: bytes | None) -> str | None:
    """The owner part of a lease value (``owner \\0 token``)."""
    return lease.split(b"\0", 1)[0].decode(errors="replace") if lease else None


@cli.command()
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
    )


@cli.command()
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
        found = saver.get_tuple(config)
        report = saver.recovery_report(thread)
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


@cli.command()
@common
@click.argument("thread")
def ledger(redis_url: str | None, key_prefix: str, as_json: bool, thread: str) -> None:
    """The tool-call ledger of THREAD: every recorded call and its outcome."""
    with open_saver(redis_url, key_prefix) as saver:
        entries = ToolLedger(saver).entries(thread)
    rows = [
        {
            "step": e.step,
            "position": e.position,
            "tool": e.name,
            "state": e.state,
            "attempts": e.attempts,
            "resolution": e.resolution,
            "idempotency_key": e.idempotency_key,
            "args": e.args,
            "result": _summary(getattr(e.result, "content", e.result)),
            "damage": e.damage,
        }
        for e in entries
    ]
    out_table(
        as_json,
        rows,
        [
            ("STEP", lambda r: r["step"]),
            ("#", lambda r: r["position"]),
            ("TOOL", lambda r: r["tool"]),
            ("STATE", lambda r: r["state"]),
            ("ATTEMPTS", lambda r: r["attempts"]),
            ("HUMAN", lambda r: r["resolution"] or "-"),
            ("IDEMPOTENCY KEY", lambda r: r["idempotency_key"]),
            ("RESULT", lambda r: str(r["result"])[:40]),
        ],
    )


@cli.command()
@common
@click.argument("thread", required=False)
@click.option("--all", "all_threads", is_flag=True, help="verify every thread")
def verify(
    redis_url: str | None, key_prefix: str, as_json: bool, thread: str | None, all_threads: bool
) -> None:
    """Check every record of THREAD (or --all threads); exit 1 if anything is damaged."""
    if not thread and not all_threads:
        raise click.UsageError("name a THREAD or pass --all")
    with open_saver(redis_url, key_prefix) as saver:
        targets = thread_ids(saver) if all_threads else [thread]
        reports = []
        with click.progressbar(targets, label="verifying", file=sys.stderr, show_pos=True) as bar:
            for thread_id in bar:
                reports.append(saver.verify(thread_id))
    data = [
        {
            "thread_id": r.thread_id,
            "ok": r.ok,
            "intact": len(r.intact_checkpoints),
            "damaged": r.damaged_checkpoints,
            "records_checked": r.records_checked,
            "findings": [vars(f) for f in r.findings],
            "quarantined": r.quarantined,
        }
        for r in reports
    ]

    def lines() -> list[str]:
        text = []
        for r in data:
            status = "ok" if r["ok"] else "DAMAGED"
            held = f", {r['quarantined']} damaged records quarantined" if r["quarantined"] else ""
            text.append(f"{r['thread_id']}: {status} ({r['intact']} intact checkpoints{held})")
            text += [f"  {f['kind']} {f['field']}: {f['reason']}" for f in r["findings"]]
        return text

    out(as_json, data, lines)
    if not all(r["ok"] for r in data):
        sys.exit(1)


@cli.group()
def server() -> None:
    """The embedded Redis server (in ./.langgraph-durable/)."""


@server.command("start")
@click.option("--data-dir", default=str(DEFAULT_DATA_DIR), show_default=True)
@click.option("--appendfsync", type=click.Choice(["always", "everysec", "no"]), default="everysec")
def server_start(data_dir: str, appendfsync: str) -> None:
    """Start the server (or find the running one) and print its URL."""
    click.echo(EmbeddedRedis(data_dir, appendfsync=appendfsync).start())


@server.command("stop")
@click.option("--data-dir", default=str(DEFAULT_DATA_DIR), show_default=True)
def server_stop(data_dir: str) -> None:
    """Stop the server, saving its data."""
    click.echo("stopped" if EmbeddedRedis(data_dir).stop() else "not running")


@server.command("status")
@click.option("--data-dir", default=str(DEFAULT_DATA_DIR), show_default=True)
@click.option("--json", "as_json", is_flag=True)
def server_status(data_dir: str, as_json: bool) -> None:
    """Whether the server runs, and where."""
    embedded = EmbeddedRedis(data_dir)
    port = embedded.running_port()
    data = {
        "running": port is not None,
        "url": f"redis://127.0.0.1:{port}/0" if port else None,
        "data_dir": str(embedded.data_dir),
    }
    out(
        as_json,
        data,
        lambda: [
            f"running at {data['url']} (data in {data['data_dir']})"
            if port
            else f"not running (data in {data['data_dir']})"
        ],
    )
    if port is None:
        sys.exit(3)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
