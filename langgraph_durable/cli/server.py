"""The embedded server's commands (``server start|stop|status``) and the ``demo``."""

from __future__ import annotations

import json
import sys

import click

from langgraph_durable.cli.common import checked_url, common, open_saver, out
from langgraph_durable.embedded import DEFAULT_DATA_DIR, EmbeddedRedis


@click.command()
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


@click.group()
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
