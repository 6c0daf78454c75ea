"""The Lua scripts, loaded once from ``langgraph_durable/lua/`` (one script per file).

Each script is the shared ``_prelude.lua`` followed by its own file; redis-py's
``register_script`` sends it with EVALSHA and falls back to loading it on NOSCRIPT.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

SCRIPT_NAMES = (
    "put_checkpoint",
    "put_writes",
    "read_checkpoints",
    "read_index",
    "delete_checkpoints",
    "restore_records",
    "quarantine",
    "ledger_read",
    "ledger_write",
    "ledger_delete",
    "lease",
    "reseal",
)


@cache
def script_source(name: str) -> str:
    folder = files("langgraph_durable") / "lua"
    return (folder / "_prelude.lua").read_text() + "\n" + (folder / f"{name}.lua").read_text()


def register_all(client: object) -> dict[str, object]:
    """Script objects bound to ``client`` (sync or asyncio, standalone or cluster)."""
    return {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}  # type: ignore[attr-defined]
