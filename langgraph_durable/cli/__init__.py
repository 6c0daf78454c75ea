"""The ``langgraph-durable`` command line: the demo, inspection, verification, migration
from another checkpointer (``migrate``), the server.

Every command takes ``--redis-url`` (default ``REDIS_URL``, else the embedded server if it
runs: only ``demo`` and ``server start`` start it), ``--cluster``, ``--key-prefix``,
``--json`` and the signing keys (``--signing-key``, ``--signing-key-file`` or
``LGD_SIGNING_KEY``). ``--version`` prints the installed version.

Safe to point at production: inspection (``threads``, ``history``, ``show``, ``ledger``,
``timeline``, ``verify``) never writes (the saver is opened with ``repair_on_read=False`` and the
default, strict serde); damage is quarantined only by ``verify --repair``. Every error is
one line on stderr (a connection, authentication or URL error: exit code 2, its password
masked), never a traceback.
"""

from __future__ import annotations

import importlib

import click

from langgraph_durable.cli.common import DurableCli

__all__ = ["COMMANDS", "cli", "main"]

# name: (its module in this package, the command's attribute there, the line --help shows
# for it). A command's module is imported only when the command runs (or its own help
# is asked for), so ``--version``, ``--help`` and ``server status`` start without
# LangGraph (tests/unit/test_cli_startup.py keeps these lines equal to the commands').
COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": (
        "server",
        "demo",
        "Kill an agent with SIGKILL mid-run, resume it, check effects happened exactly once.",
    ),
    "doctor": (
        "doctor",
        "doctor",
        "Check the Redis you have: server, mode, scripts (on a scratch thread, removed...",
    ),
    "threads": (
        "inspection",
        "threads",
        "Every thread with checkpoints: newest step and time, checkpoints, ledger entries.",
    ),
    "history": ("inspection", "history", "The checkpoints of THREAD, newest first."),
    "show": ("inspection", "show", "The state of THREAD at its newest (or the given) CHECKPOINT."),
    "ledger": (
        "inspection",
        "ledger",
        "The ledger of THREAD: every recorded tool call and model answer, its outcome, the...",
    ),
    "timeline": (
        "timeline",
        "timeline",
        "Picture THREAD in one HTML page: checkpoints by step and namespace with forks...",
    ),
    "escalations": (
        "operators",
        "escalations",
        "Every tool call waiting for a human's answer, and every call of a rolled-back run...",
    ),
    "resolve": (
        "operators",
        "resolve",
        "Answer the waiting call IDEMPOTENCY_KEY of THREAD; its next run applies the answer...",
    ),
    "drop": (
        "operators",
        "drop",
        "Drop the recorded model answer IDEMPOTENCY_KEY of THREAD (the next attempt at its...",
    ),
    "verify": (
        "maintenance",
        "verify",
        "Check every record of THREAD (or --all threads); exit 1 if anything is damaged or...",
    ),
    "acknowledge": (
        "maintenance",
        "acknowledge",
        "Acknowledge everything THREAD's quarantine holds, once someone has looked at it:...",
    ),
    "resign": (
        "maintenance",
        "resign",
        "Rewrite the records of THREAD (or --all threads) under the newest signing key, to...",
    ),
    "migrate": (
        "migrate",
        "migrate",
        "Copy every thread of SOURCE (its whole history, pending writes and metadata) into...",
    ),
    "server": ("server", "server", "The embedded Redis server (one per user; see --data-dir)."),
}


class LazyCli(DurableCli):
    """The command group, each command loaded when it is used (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"langgraph_durable.cli.{module}"), attribute)
        return command  # type: ignore[no-any-return]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(cls=LazyCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="langgraph-durable", prog_name="langgraph-durable")
def cli() -> None:
    """langgraph-durable: a crash-safe LangGraph checkpointer on Redis."""


def main() -> None:
    cli()
