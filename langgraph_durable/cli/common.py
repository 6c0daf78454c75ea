"""What every command shares: options, opening the saver, errors in one line, output.

Owns ``--redis-url``/``--cluster``/``--key-prefix``/``--json`` and the signing keys
(``common``), the saver a command reads through (``open_saver``: it never writes on a
read, and uses the strict default serde), the command group that answers errors about
reaching Redis or bad input in one line (exit 2, password masked), and text/JSON output.
Every error is one line on stderr in one style (``echo_error``: "langgraph-durable: ..."):
click's own errors (a missing argument, "no such thread") included, never a traceback.
Only ``demo`` and ``server start`` start the embedded server: every other command, given
no URL, uses it if it runs, else says in one line that no server runs (``checked_url``).
Text for a human goes through ``printable``: stored text (thread ids, messages, tool
results, reasons) never reaches the terminal as control characters; ``--json`` keeps it
exact (``json.dumps`` escapes them).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click
import redis
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.retry import Retry

from langgraph_durable.core import reply_codes
from langgraph_durable.core.errors import (
    ConfigurationError,
    InvalidConfigError,
)
from langgraph_durable.core.redact import redact, redact_url
from langgraph_durable.io import connect
from langgraph_durable.tools.embedded import ServerNotRunningError, command_line, resolve_url
from langgraph_durable.tools.settings import KEY_PREFIX_ENV, SIGNING_KEY_ENV, checked_keys
from langgraph_durable.tools.settings import signing_keys as env_signing_keys

if TYPE_CHECKING:  # the saver (and LangGraph) load when a command opens one
    from langgraph_durable.saver import RedisSaver

PROBE_TIMEOUT = 5.0  # seconds for the first PING to connect and answer

# What a terminal acts on instead of showing: C0, DEL and C1 controls (ESC starts escape
# sequences, CR rewrites a line, 0x9b is a one-byte CSI), line and paragraph separators,
# and the bidi embeddings/overrides/isolates that reorder what follows them.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object) -> str:
    """``text`` for a terminal: every control character, bidi override or isolate and
    line separator as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``); other text, non-ASCII
    included, as is. Backslashes are kept, so applying it twice changes nothing."""
    return _UNSAFE.sub(_escape, str(text))


def echo_error(message: str) -> None:
    """One line on stderr, as every error the commands answer themselves."""
    click.echo(f"langgraph-durable: {printable(message)}", err=True)


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url, --cluster, --key-prefix, --json and the signing keys on every command."""

    @click.option(
        "--redis-url",
        envvar="REDIS_URL",
        default=None,
        help="Redis URL (default: REDIS_URL, else the embedded server if it runs); prefer "
        "REDIS_URL for a URL with a password",
    )
    @click.option(
        "--cluster", is_flag=True, envvar="LGD_CLUSTER", help="the URL is a Redis Cluster node"
    )
    @click.option(
        "--key-prefix",
        envvar=KEY_PREFIX_ENV,
        default="lgd",
        show_default=True,
        help=f"the savers' key_prefix (or {KEY_PREFIX_ENV})",
    )
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
    else:
        return env_signing_keys(environ)
    return checked_keys(keys, source)


def checked_url(redis_url: str | None, *, start: bool = False) -> str:
    """The URL to use (see ``resolve_url``), remembered for error messages; a URL redis-py
    cannot parse is a ``ConfigurationError`` that masks its password. With no URL, the
    embedded server's: started only if ``start`` (the demo); else, when it does not run
    (never started, or stopped by ``server stop``), one line saying so and exit 2."""
    ctx = click.get_current_context()
    try:
        url = resolve_url(redis_url, start=start)
    except ServerNotRunningError as exc:
        echo_error(
            f"no Redis server is running: the embedded one (data in {exc.data_dir}) is not; "
            f"start it with `{command_line()} server start`, or point at yours with "
            "--redis-url or REDIS_URL"
        )
        ctx.exit(2)
    ctx.meta["lgd_url"] = url
    try:
        if connect.is_sentinel_url(url):
            connect.parse_sentinel_url(url)
        else:
            parse_url(url)
    except ValueError as exc:
        raise ConfigurationError(f"bad Redis URL {redact_url(url)!r}: {exc}") from None
    return url


def probe(url: str) -> None:
    """PING once with short timeouts and no retries, so a wrong port, password or TLS
    setting fails in seconds (a TLS handshake with a plain server would otherwise wait
    forever, and the saver's client retries ten times)."""
    quick = {
        "socket_connect_timeout": PROBE_TIMEOUT,
        "socket_timeout": PROBE_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),
    }
    if connect.is_sentinel_url(url):  # the sentinels, then the master they name
        from langgraph_durable.saver import RedisSaver

        client = connect.sync_client(RedisSaver, url, cluster=False, options=quick)
    else:
        client = redis.Redis.from_url(url, **quick)
    try:
        client.ping()
    finally:
        for sentinel in connect.sentinel_clients(client):
            sentinel.close()
        client.close()


@contextmanager
def open_saver(
    redis_url: str | None, key_prefix: str, allowed_types: tuple[tuple[str, str], ...] = ()
) -> Iterator[RedisSaver]:
    """A saver for inspection: it never writes on a read (damage is reported, not moved),
    and deserializes with the saver's default serde, LangGraph's strict allowlist (no serde
    is passed here on purpose) plus ``allowed_types``."""
    meta = click.get_current_context().meta
    url = checked_url(redis_url)
    probe(url)
    from langgraph_durable.saver import RedisSaver

    with RedisSaver.from_conn_string(
        url,
        key_prefix=key_prefix,
        cluster=meta.get("lgd_cluster", False),
        signing_key=meta.get("lgd_signing_key"),
        repair_on_read=False,
        allowed_types=allowed_types,
    ) as saver:
        yield saver


# Errors about reaching Redis, not about its data: one line on stderr and exit code 2.
UNREACHABLE = (
    redis.exceptions.ConnectionError,  # refused, TLS, AuthenticationError (WRONGPASS, NOAUTH)
    redis.exceptions.TimeoutError,
    redis.exceptions.NoPermissionError,  # NOPERM: the ACL user may not run a command
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.RedisClusterException,
    ConfigurationError,
)


class DurableCli(click.Group):
    """The command group; answers every error in one line (``echo_error``), without a
    traceback: reaching Redis and bad input exit 2, click's own errors with their code
    ("no such thread" 1, a usage error 2), anything unexpected 1."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:  # the group's own options: `langgraph-durable --bogus`, say
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # no command at all: the help, as click shows it
        except click.ClickException as exc:
            _click_error(exc, None)
            raise click.exceptions.Exit(exc.exit_code) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UNREACHABLE as exc:
            _unreachable(ctx, exc)
        except redis.exceptions.ResponseError as exc:
            if reply_codes.is_auth_refusal(exc):
                _unreachable(ctx, exc)
            _unexpected(ctx, exc)
        except InvalidConfigError as exc:  # a THREAD that cannot be a thread id, say
            echo_error(f"bad input: {' '.join(str(exc).split())}")
            ctx.exit(2)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `langgraph-durable server` alone: its help
        except click.ClickException as exc:  # "no such thread '...'", a missing argument
            _click_error(exc, ctx)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise  # an exit code on purpose, or Ctrl-C ("Aborted!")
        except Exception as exc:  # noqa: BLE001 - a bug or an unforeseen failure: one line
            _unexpected(ctx, exc)


def _click_error(exc: click.ClickException, group: click.Context | None) -> None:
    """A click error in our style: one line; a usage error points at the command's help."""
    message = exc.format_message()  # one line: echo_error shows a line break as \n
    if isinstance(exc, click.UsageError):
        if exc.ctx is not None:  # the context it was raised in (a parse error, say)
            where = exc.ctx.command_path
        elif group is not None and group.invoked_subcommand:  # raised by a command's body
            where = f"{group.command_path} {group.invoked_subcommand}"
        else:
            where = "langgraph-durable"
        message = f"bad input: {message} (see `{where} --help`)"
    echo_error(message)


def _unexpected(ctx: click.Context, exc: BaseException) -> None:
    """What no command answers itself, in one line: its type and first line, password
    masked; exit 1, as an uncaught exception would."""
    first = next(iter(str(exc).splitlines()), "")
    echo_error(redact(f"unexpected error: {type(exc).__name__}: {first}", ctx.meta.get("lgd_url")))
    ctx.exit(1)


def _unreachable(ctx: click.Context, exc: BaseException) -> None:
    url = ctx.meta.get("lgd_url")
    if isinstance(exc, ConfigurationError):
        what = "bad configuration"
    elif isinstance(exc, redis.exceptions.AuthenticationError) or reply_codes.is_auth_refusal(exc):
        what = "authentication failed (check the user and password)"
    else:
        what = "cannot use Redis"
    where = f" at {redact_url(url)}" if url and not isinstance(exc, ConfigurationError) else ""
    message = " ".join(f"{what}{where}: {exc or type(exc).__name__}".split())  # one line
    echo_error(redact(message, url))
    ctx.exit(2)


def out(as_json: bool, data: Any, lines: Callable[[], list[str]]) -> None:
    """``data`` as JSON (exact: json.dumps escapes controls), or ``lines`` for a human,
    each made ``printable``: no line of ours needs a control character."""
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        for line in lines():
            click.echo(printable(line))


def out_table(
    as_json: bool,
    rows: list[dict[str, Any]],
    columns: list[tuple[str, Callable[[dict], Any]]],
    empty: str | None = None,
) -> None:
    """``rows`` as JSON, or as a text table of ``columns`` (header, cell of a row); with no
    rows, the line ``empty`` says so instead of a lone header (JSON: ``[]``)."""

    def lines() -> list[str]:
        if not rows and empty is not None:
            return [empty]
        # escaped before measuring, so the columns line up with what is shown
        cells = [[h for h, _ in columns]] + [
            [printable(cell(r)) for _, cell in columns] for r in rows
        ]
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


def thread_ids(saver: RedisSaver) -> list[str]:
    return saver.drive(saver.core.all_thread_ids())
