"""The command line starts without LangGraph for ``--version``, ``--help`` and ``server``
(langgraph_durable/cli/__init__.py loads a command's module only when it runs); its
start-up time is measured in benchmarks/cli_startup.py, not here."""

from __future__ import annotations

import subprocess
import sys

import click

from langgraph_durable.cli import COMMANDS, cli

HEAVY = ("langgraph", "langchain_core", "langgraph_durable.saver", "langgraph_durable.ledger")


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return set(out.stdout.split())


def test_the_fast_commands_import_no_langgraph() -> None:
    for code in (
        "import langgraph_durable",
        "import langgraph_durable.cli",
        "import langgraph_durable.cli.server",
    ):
        loaded = modules_after(code)
        assert not [m for m in HEAVY if m in loaded], (code, [m for m in HEAVY if m in loaded])


def test_the_help_lines_are_the_commands_own() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name, (_, _, line) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first.startswith(line.rstrip(".")), (name, first, line)
    assert cli.get_command(ctx, "no-such-command") is None


def test_a_public_name_loads_on_first_use() -> None:
    loaded = modules_after("import langgraph_durable\nlanggraph_durable.RedisSaver")
    assert "langgraph_durable.saver" in loaded
    assert "langgraph_durable.ledger" not in modules_after(
        "import langgraph_durable\nlanggraph_durable.ConfigurationError"
    )
