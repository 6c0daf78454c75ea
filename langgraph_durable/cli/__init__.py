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

import click

from langgraph_durable.cli.common import DurableCli
from langgraph_durable.cli.inspection import history, ledger, show, threads
from langgraph_durable.cli.maintenance import resign, verify
from langgraph_durable.cli.migrate import migrate
from langgraph_durable.cli.operators import drop, escalations, resolve
from langgraph_durable.cli.server import demo, server
from langgraph_durable.cli.timeline import timeline

__all__ = ["cli", "main"]


@click.group(cls=DurableCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="langgraph-durable", prog_name="langgraph-durable")
def cli() -> None:
    """langgraph-durable: a crash-safe LangGraph checkpointer on Redis."""


for command in (
    demo,
    threads,
    history,
    show,
    ledger,
    timeline,
    escalations,
    resolve,
    drop,
    verify,
    resign,
    migrate,
    server,
):
    cli.add_command(command)


def main() -> None:
    cli()
