"""The ``langgraph-durable`` command line: the demo, inspection, verification, the server.

Every command takes ``--redis-url`` (default ``REDIS_URL``, else the embedded server in
``./.langgraph-durable/``, started if needed), ``--cluster``, ``--key-prefix``, ``--json``
and the signing keys (``--signing-key``, ``--signing-key-file`` or ``LGD_SIGNING_KEY``).

Safe to point at production: inspection (``threads``, ``history``, ``show``, ``ledger``,
``verify``) never writes (the saver is opened with ``repair_on_read=False`` and the
default, strict serde); damage is quarantined only by ``verify --repair``. A connection,
authentication or URL error is one line on stderr and exit code 2, its password masked.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click
import redis
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.retry import Retry

from langgraph_durable.embedded import DEFAULT_DATA_DIR, EmbeddedRedis, resolve_url
from langgraph_durable.errors import (
    CheckpointCorruptedError,
    ConfigurationError,
    InvalidConfigError,
    UnreadableThreadError,
)
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.redact import redact, redact_url
from langgraph_durable.saver import RedisSaver

SIGNING_KEY_ENV = "LGD_SIGNING_KEY"
MIN_KEY_BYTES = 16  # as the saver's Envelope requires
PROBE_TIMEOUT = 5.0  # seconds for the first PING to connect and answer


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url, --cluster, --key-prefix, --json and the signing keys on every command."""

    @click.option(
        "--redis-url",
        envvar="REDIS_URL",
        default=None,
        help="Redis URL (default: REDIS_URL, else the embedded server); prefer REDIS_URL "
        "for a URL with a password",
    )
    @click.option(
        "--cluster", is_flag=True, envvar="LGD_CLUSTER", help="the URL is a Redis Cluster node"
    )
    @click.option("--key-prefix", default="lgd", show_default=True, help="the savers' key_prefix")
    @click.option("--json", "as_json", is_flag=True, help="machine-readable output")
    @click.option(
        "--signing-key",
        "signing_key",
        multiple=True,
        metavar="KEY",
        help=f"the savers' signing_key; repeat for rotation, newest first (or {SIGNING_KEY_ENV}: "
        "comma-separated, newest first)",
    )
    @click.option(
        "--signing-key-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="read the signing keys from a file: one a line, newest first",
    )
    @functools.wraps(fn)
    def wrapper(
        *args: Any,
        cluster: bool,
        signing_key: tuple[str, ...],
        signing_key_file: str | None,
        **kwargs: Any,
    ) -> Any:
        meta = click.get_current_context().meta  # read by open_saver
        meta["lgd_cluster"] = cluster
        meta["lgd_signing_key"] = signing_keys(signing_key, signing_key_file, os.environ)
        return fn(*args, **kwargs)

    return wrapper


def signing_keys(
    flags: tuple[str, ...], path: str | None, environ: Mapping[str, str]
) -> list[bytes] | None:
    """The signing keys, newest first: ``--signing-key`` flags, else ``--signing-key-file``,
    else ``LGD_SIGNING_KEY``; None when none is given. Never echoes a key."""
    if flags and path:
        raise click.UsageError("pass --signing-key or --signing-key-file, not both")
    if flags:
        source, keys = "--signing-key", [k.encode() for k in flags]
    elif path:
        source = f"--signing-key-file {path}"
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {path}: {exc.strerror or exc}", param_hint="--signing-key-file"
            ) from None
        keys = [line for line in text.splitlines() if line]  # line ends stripped
        if not keys:
            raise click.BadParameter(f"{path} holds no key", param_hint="--signing-key-file")
    elif environ.get(SIGNING_KEY_ENV, "").strip():
        source = SIGNING_KEY_ENV
        keys = [k.strip().encode() for k in environ[SIGNING_KEY_ENV].split(",") if k.strip()]
    else:
        return None
    for number, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_BYTES:
            raise click.BadParameter(
                f"key {number} from {source} is {len(key)} bytes; a signing key must be at "
                f"least {MIN_KEY_BYTES} bytes"
            )
    return keys


def checked_url(redis_url: str | None) -> str:
    """The URL to use (see ``resolve_url``), remembered for error messages; a URL redis-py
    cannot parse is a ``ConfigurationError`` that masks its password."""
    url = resolve_url(redis_url)
    click.get_current_context().meta["lgd_url"] = url
    try:
        parse_url(url)
    except ValueError as exc:
        raise ConfigurationError(f"bad Redis URL {redact_url(url)!r}: {exc}") from None
    return url


def probe(url: str) -> None:
    """PING once with short timeouts and no retries, so a wrong port, password or TLS
    setting fails in seconds (a TLS handshake with a plain server would otherwise wait
    forever, and the saver's client retries ten times)."""
    client = redis.Redis.from_url(
        url,
        socket_connect_timeout=PROBE_TIMEOUT,
        socket_timeout=PROBE_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        client.ping()
    finally:
        client.close()


@contextmanager
def open_saver(redis_url: str | None, key_prefix: str) -> Iterator[RedisSaver]:
    """A saver for inspection: it never writes on a read (damage is reported, not moved),
    and deserializes with the saver's default serde, LangGraph's strict allowlist (no serde
    is passed here on purpose)."""
    meta = click.get_current_context().meta
    url = checked_url(redis_url)
    probe(url)
    with RedisSaver.from_conn_string(
        url,
        key_prefix=key_prefix,
        cluster=meta.get("lgd_cluster", False),
        signing_key=meta.get("lgd_signing_key"),
        repair_on_read=False,
    ) as saver:
        yield saver


# Errors about reaching Redis, not about its data: one line on stderr and exit code 2.
_UNREACHABLE = (
    redis.exceptions.ConnectionError,  # refused, TLS, AuthenticationError (WRONGPASS, NOAUTH)
    redis.exceptions.TimeoutError,
    redis.exceptions.NoPermissionError,  # NOPERM: the ACL user may not run a command
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.RedisClusterException,
    ConfigurationError,
)
_AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM")


class _Cli(click.Group):
    """The command group; answers errors reaching Redis in one line, without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _UNREACHABLE as exc:
            _unreachable(ctx, exc)
        except redis.exceptions.ResponseError as exc:
            if not str(exc).startswith(_AUTH_REPLIES):
                raise
            _unreachable(ctx, exc)
        except InvalidConfigError as exc:  # a THREAD that cannot be a thread id, say
            click.echo(f"langgraph-durable: bad input: {' '.join(str(exc).split())}", err=True)
            ctx.exit(2)


def _unreachable(ctx: click.Context, exc: BaseException) -> None:
    url = ctx.meta.get("lgd_url")
    if isinstance(exc, ConfigurationError):
        what = "bad configuration"
    elif isinstance(exc, redis.exceptions.AuthenticationError) or str(exc).startswith(
        _AUTH_REPLIES
    ):
        what = "authentication failed (check the user and password)"
    else:
        what = "cannot use Redis"
    where = f" at {redact_url(url)}" if url and not isinstance(exc, ConfigurationError) else ""
    message = " ".join(f"{what}{where}: {exc or type(exc).__name__}".split())  # one line
    click.echo(f"langgraph-durable: {redact(message, url)}", err=True)
    ctx.exit(2)


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
    try:
        return datetime.fromisoformat(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):  # stored bytes say what they like: show, never crash
        return repr(ts)[:40]


def _count(saver: RedisSaver, key: str) -> int | str:
    """Members of a sorted set, or "damaged" when the key holds another type."""
    try:
        return int(saver.client.zcard(key))
    except redis.exceptions.ResponseError:
        return "damaged"


def thread_ids(saver: RedisSaver) -> list[str]:
    return saver._drive(saver.core._all_thread_ids())


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """langgraph-durable: a crash-safe LangGraph checkpointer on Redis."""


@cli.command()
@common
@click.option("--damage", is_flag=True, help="damage the newest checkpoint before resuming")
@click.option("--delay", type=float, default=0.5, show_default=True, help="tool latency (s)")
def demo(redis_url: str | None, key_prefix: str, as_json: bool, damage: bool, delay: float) -> None:
    """Kill an agent with SIGKILL mid-run, resume it, check effects happened exactly once."""
    from langgraph_durable.demo import run_demo

    url = checked_url(redis_url)
    with open_saver(url, key_prefix):  # Redis answers (else one line, exit 2) before workers start
        pass
    emit = (lambda line: None) if as_json else click.echo
    verdict = run_demo(
        url,
        prefix=key_prefix,
        damage=damage,
        delay=delay,
        emit=emit,
        signing_key=click.get_current_context().meta.get("lgd_signing_key"),
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
            unreadable = None
            try:
                latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
            except UnreadableThreadError as exc:  # e.g. signed, and no --signing-key
                latest, unreadable = None, str(exc)
            tk = saver.keys.thread(thread_id)
            rows.append(
                {
                    "thread_id": thread_id,
                    "unreadable": unreadable,
                    "step": latest.metadata.get("step") if latest else None,
                    "updated": latest.checkpoint["ts"] if latest else None,
                    "checkpoints": _count(saver, tk.cps),
                    "ledger_entries": _count(saver, tk.lgx),
                    "leased_to": _holder(saver.client.get(tk.lease)),
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
    )


def _require_thread(saver: RedisSaver, thread: str, key_prefix: str) -> None:
    """Exit 1 naming the thread when Redis holds no key of it (a typo, another prefix)."""
    tk = saver.keys.thread(thread)
    if not saver.client.exists(*tk.all(), *tk.damaged()):
        raise click.ClickException(f"no such thread {thread!r} (key prefix {key_prefix!r})")


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
        if not rows:
            _require_thread(saver, thread, key_prefix)
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
        try:
            found = saver.get_tuple(config)
        except CheckpointCorruptedError as exc:  # damage (or a refused type), not a traceback
            raise click.ClickException(
                f"checkpoint {exc.checkpoint_id} of thread {thread!r} is damaged: {exc.reason}"
            ) from None
        except UnreadableThreadError as exc:
            raise click.ClickException(str(exc)) from None
        report = saver.recovery_report(thread)
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


@cli.command()
@common
@click.argument("thread")
def ledger(redis_url: str | None, key_prefix: str, as_json: bool, thread: str) -> None:
    """The tool-call ledger of THREAD: every recorded call and its outcome."""
    with open_saver(redis_url, key_prefix) as saver:
        entries = ToolLedger(saver).entries(thread)
        if not entries:
            _require_thread(saver, thread, key_prefix)
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
    from langgraph_durable.repair import repair as repair_plan

    if not thread and not all_threads:
        raise click.UsageError("name a THREAD or pass --all")
    data = []
    with open_saver(redis_url, key_prefix) as saver:
        targets = thread_ids(saver) if all_threads else [thread]
        if not targets:
            raise click.ClickException(f"no threads under key prefix {key_prefix!r}")
        with click.progressbar(targets, label="verifying", file=sys.stderr, show_pos=True) as bar:
            for thread_id in bar:
                tk = saver.keys.thread(thread_id)
                if not saver.client.exists(*tk.all(), *tk.damaged()):
                    data.append({"thread_id": thread_id, "exists": False, "ok": False})
                    continue
                moved = saver._drive(repair_plan(saver.core, thread_id)) if repair else None
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
        return text

    out(as_json, data, lines)
    if not all(r["ok"] for r in data):
        sys.exit(1)


def _shown(field_: str) -> str:
    """A hash field or index member for a terminal: its separators as spaces."""
    return field_.replace("\x00", " ")


@cli.command()
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
