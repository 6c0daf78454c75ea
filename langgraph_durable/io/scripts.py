"""The Lua scripts, loaded from ``langgraph_durable/io/lua/`` (one script per file), and
the commands that run them.

Each script is the shared ``_prelude.lua`` followed by its own file. Read-only scripts
(``READ_ONLY``) are flagged ``no-writes`` on Redis 7+ and sent as ``EVALSHA_RO``, so reads
keep working when the server is out of memory under ``noeviction``, on a read-only
replica and for an ACL user allowed only reads. Redis 6.2 knows neither the flag nor the
command: there they run unflagged with ``EVALSHA``. A Redis Cluster client gets
``EVALSHA`` with the flagged script (redis-py asks the server for the keys of any other
scripting command, a round trip per call); the flag still lets it run out of memory
and on replicas.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

SCRIPT_NAMES = (
    "put_checkpoint",
    "put_writes",
    "read_checkpoints",
    "read_index",
    "recheck_values",
    "delete_checkpoints",
    "restore_records",
    "quarantine",
    "ledger_read",
    "ledger_write",
    "ledger_settle",
    "ledger_delete",
    "lease",
    "reseal",
    "reindex",
    "refresh",
)
READ_ONLY = frozenset({"read_checkpoints", "read_index", "recheck_values", "ledger_read"})
_NO_WRITES = "#!lua flags=no-writes\n"


@cache
def script_source(name: str, flagged: bool = False) -> str:
    folder = files("langgraph_durable.io") / "lua"
    source = (folder / "_prelude.lua").read_text() + "\n" + (folder / f"{name}.lua").read_text()
    return _NO_WRITES + source if flagged and name in READ_ONLY else source


@cache
def script_sha(name: str, flagged: bool = False) -> str:
    return hashlib.sha1(script_source(name, flagged).encode()).hexdigest()


@dataclass(frozen=True)
class ScriptSet:
    """Which variant of the scripts a saver sends; decided once its server is known."""

    flagged: bool = False  # Redis 7+: read-only scripts carry the no-writes flag
    read_only_command: bool = False  # ... and are sent as EVALSHA_RO (not on a cluster)

    @classmethod
    def for_server(cls, version: tuple[int, ...] | None, *, cluster: bool) -> ScriptSet:
        modern = version is not None and version >= (7,)
        return cls(flagged=modern, read_only_command=modern and not cluster)

    def sources(self) -> list[str]:
        return [script_source(name, self.flagged) for name in SCRIPT_NAMES]

    def command(
        self, name: str, keys: list[str], args: list[Any], *, whole: bool = False
    ) -> tuple[Any, ...]:
        """The call of script ``name``: by its SHA (``EVALSHA``), or ``whole`` with its
        source (``EVAL``), which no server can answer NOSCRIPT (the driver's last resort
        when a server keeps losing the scripts it just loaded: a failover between the
        load and the call, a replica promoted without them)."""
        read_only = name in READ_ONLY
        flagged = self.flagged and read_only
        if whole:
            verb = "EVAL_RO" if read_only and self.read_only_command else "EVAL"
            return (verb, script_source(name, flagged), len(keys), *keys, *args)
        verb = "EVALSHA_RO" if read_only and self.read_only_command else "EVALSHA"
        return (verb, script_sha(name, flagged), len(keys), *keys, *args)


def server_version(info: Any) -> tuple[int, ...] | None:
    """The oldest ``redis_version`` in an ``INFO server`` reply (a cluster client's reply
    maps each node to its own), or None if it says none."""
    if not isinstance(info, dict):
        return None
    replies = (
        [info] if "redis_version" in info else [v for v in info.values() if isinstance(v, dict)]
    )
    versions = []
    for reply in replies:
        text = reply.get("redis_version")
        try:
            versions.append(tuple(int(p) for p in str(text).split(".")[:2]))
        except ValueError:
            continue
    return min(versions) if versions else None
