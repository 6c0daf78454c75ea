"""The embedded server's commands (``server start|stop|status``) and the ``demo``."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import click

from langgraph_durable.cli.common import (
    checked_url,
    common,
    echo_error,
    open_saver,
    out,
    printable,
)
from langgraph_durable.core.redact import redact, redact_url
from langgraph_durable.tools.embedded import (
    DEMO_PREFIX,
    EmbeddedRedis,
    command_line,
    default_data_dir,
)


@click.command()
@common
@click.option("--damage", is_flag=True, help="damage the newest checkpoint before resuming")
@click.option(
    "--delay", type=click.FloatRange(min=0), default=0.5, show_default=True, help="tool latency (s)"
)
def demo(redis_url: str | None, key_prefix: str, as_json: bool, damage: bool, delay: float) -> None:
    """Kill an agent with SIGKILL mid-run, resume it, check effects happened exactly once.

    Its threads go under the key prefix "lgd-demo" (unless --key-prefix says otherwise:
    never mixed into an application's default "lgd")
    and expire a day after their last write. With no URL, it starts the embedded server
    if it is not running (the only command besides `server start` that does), which
    says so once; it ends with the commands that show its thread."""
    from langgraph_durable.cli.demo import DemoFailed, run_demo

    ctx = click.get_current_context()
    url = checked_url(redis_url, start=True)
    with open_saver(url, key_prefix):  # Redis answers (else one line, exit 2) before workers start
        pass
    emit = (lambda line: None) if as_json else (lambda line: click.echo(printable(line)))
    try:
        verdict = run_demo(
            url,
            prefix=key_prefix,
            damage=damage,
            delay=delay,
            emit=emit,
            signing_key=ctx.meta.get("lgd_signing_key"),
        )
    except DemoFailed as exc:
        echo_error(f"the demo failed: {redact(str(exc), url)}")
        sys.exit(1)
    for line in _look_at_it(ctx, url, key_prefix, verdict["thread_id"]):
        emit(line)
    if as_json:
        click.echo(json.dumps(verdict, indent=2))
    sys.exit(0 if verdict["exactly_once"] else 1)


for _option in demo.params:  # --help shows the demo's own prefix, not the CLI's "lgd"
    if _option.name == "key_prefix":
        _option.default = DEMO_PREFIX


def _look_at_it(ctx: click.Context, url: str, key_prefix: str, thread_id: str) -> list[str]:
    """The demo's last two lines: the commands that show its thread, as they must be run
    (its key prefix; the URL unless it is the embedded server's, which the commands find
    themselves; never a password, nor a signing key)."""
    options = ["--key-prefix", key_prefix]
    note = ""
    if ctx.get_parameter_source("redis_url") is not click.core.ParameterSource.DEFAULT:
        if redact_url(url) == url:
            options += ["--redis-url", url]
        elif ctx.get_parameter_source("redis_url") is click.core.ParameterSource.COMMANDLINE:
            note = "  (with REDIS_URL set to your --redis-url)"
    if ctx.params.get("signing_key_file"):
        options += ["--signing-key-file", ctx.params["signing_key_file"]]
    elif ctx.params.get("signing_key"):
        note += "  (with your --signing-key options)"

    def command(*args: str) -> str:  # the program as this shell finds it (README: .venv)
        return " ".join([command_line(), shlex.join([*args, *options])])

    return [
        f"see it with the command line: {command('threads')}{note}",
        f"  its ledger (or history, show, verify): {command('ledger', thread_id)}",
    ]


@click.group()
def server() -> None:
    """The embedded Redis server (one per user; see --data-dir)."""


def data_dir_option(command: Any) -> Any:
    return click.option(
        "--data-dir",
        default=None,
        help="default: $LGD_DATA_DIR, else one per user "
        f"({default_data_dir()}), shared by the demo, the notebooks and the command line",
    )(command)


@server.command("start")
@data_dir_option
@click.option("--port", type=click.IntRange(1, 65535), help="default: a free port")
@click.option("--appendfsync", type=click.Choice(["always", "everysec", "no"]), default="everysec")
def server_start(data_dir: str | None, port: int | None, appendfsync: str) -> None:
    """Start the server (or find the running one) and print its URL."""
    click.echo(EmbeddedRedis(data_dir, appendfsync=appendfsync).start(port))


@server.command("stop")
@data_dir_option
def server_stop(data_dir: str | None) -> None:
    """Stop the server, saving its data."""
    click.echo("stopped" if EmbeddedRedis(data_dir).stop() else "not running")


@server.command("status")
@data_dir_option
@click.option("--json", "as_json", is_flag=True)
def server_status(data_dir: str | None, as_json: bool) -> None:
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
