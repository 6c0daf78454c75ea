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
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from langgraph_durable.core.layouts import COMPACT, COMPACT_LAYOUTS

SCRIPT_NAMES = (
    "put_checkpoint",
    "put_writes",
    *(name + COMPACT for name in COMPACT_LAYOUTS),
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
def _prelude_parts(
    prelude: str, positions: tuple[tuple[str, str], ...]
) -> tuple[dict[str, str], re.Pattern[str], list[str], dict[str, range]]:
    """``assemble``'s reading of the prelude, the same for every script with the same key
    ``positions``: the constants' values, the pattern of their names, the prelude's lines
    with numbers written in, and each definition's lines. Kept and shared: read, never
    changed."""
    values: dict[str, str] = {}
    for names, numbers in _CONSTANTS.findall(prelude):
        for key, value in zip(names.split(", "), numbers.split(", "), strict=True):
            values[key] = values.get(value, value)
    values |= dict(positions)
    as_number = re.compile(r"\b(" + "|".join(values) + r")\b")
    lines = as_number.sub(lambda m: values[m.group(1)], _CONSTANTS.sub("", prelude)).split("\n")
    blocks: dict[str, range] = {}  # each definition's lines
    at = 0
    while at < len(lines):
        found = _DEFINITION.match(lines[at])
        end = at
        if found and found.group(1) and not lines[at].rstrip().endswith(" end"):
            end = lines.index("end", at)  # a function's last line: "end" at column 0
        elif found and lines[at].rstrip().endswith("{"):
            end = next(i for i in range(at, len(lines)) if lines[i].startswith("}"))
        if found:
            blocks[found.group(2)] = range(at, end + 1)
        at = end + 1
    return values, as_number, lines, blocks


@cache
def script_source(name: str, flagged: bool = False) -> str:
    folder = files("langgraph_durable.io") / "lua"
    base = name.removesuffix(COMPACT)
    prelude, body = (folder / "_prelude.lua").read_text(), (folder / f"{base}.lua").read_text()
    if base != name:
        return compact(prelude, body, COMPACT_LAYOUTS[base])
    source = assemble(prelude, body)
    return _NO_WRITES + source if flagged and name in READ_ONLY else source


def compact(prelude: str, body: str, layout: tuple[str, ...]) -> str:
    """Script ``body`` for KEYS in ``layout`` (``layouts.py``): each key at
    its position there; one left out at a position no call passes (a path that reached
    it would fail, not touch another key). Such a call has no ttl: its first line
    refuses one (``arm`` and ``persist`` walk every key of the full layout). So the
    helpers of ``_NOT_IN_COMPACT`` do nothing or never run: one no-op stands for them
    all (Redis makes each closure of a script anew at every call)."""
    at = {f"K_{kind.upper()}": str(i) for i, kind in enumerate(layout, 1)}
    positions = dict.fromkeys(_constant_names(prelude), "99") | at
    source = assemble(prelude, body, positions, stubs=_NOT_IN_COMPACT)
    names = ", ".join(_NOT_IN_COMPACT)
    first = (
        "if ARGV[1] ~= '0' then return redis.error_reply('LGD_LAYOUT compact keys, a ttl') end "
        f"local function noop() end local {names} = {', '.join(['noop'] * len(_NOT_IN_COMPACT))} "
    )
    return first + source  # on the first line: Redis's line numbers stay the prelude's


# Without a ttl: arm, touch and persist do nothing, interrupted is asked only with one
# (and writes_of only by it); without the twins, repairing never calls repair.
_NOT_IN_COMPACT = ("arm", "touch", "persist", "interrupted", "writes_of", "repair")


def _constant_names(prelude: str) -> list[str]:
    return [n for names, _ in _CONSTANTS.findall(prelude) for n in names.split(", ")]


_CONSTANTS = re.compile(r"^local ((?:K_[A-Z]+|TWIN)(?:, (?:K_[A-Z]+|TWIN))*) = (.+)$", re.MULTILINE)
_DEFINITION = re.compile(r"^local (function )?(\w+)")
_WORD = re.compile(r"\w+")


def assemble(
    prelude: str, body: str, positions: dict[str, str] | None = None, stubs: tuple[str, ...] = ()
) -> str:
    """Script ``body`` behind the prelude as it runs it: the key positions (``K_*``,
    ``TWIN``) written as numbers, and the definitions ``body`` never reaches blanked out
    (neither changes what a script does). Redis runs a whole
    script at every call, so each function the prelude defines is a closure made anew and
    each table a table filled anew (~20,000 instructions of Redis a call for the whole
    prelude, as much as four commands the script calls). Every line stays, blank where
    cut, so Redis's line numbers still point into ``_prelude.lua``. ``positions``, if
    given, replaces the prelude's numbers, and the definitions of ``stubs`` are cut,
    the caller defining those names (``compact``)."""
    values, as_number, lines, blocks = _prelude_parts(
        prelude, tuple(sorted((positions or {}).items()))
    )
    body = as_number.sub(lambda m: values[m.group(1)], body)
    needed: set[str] = set(stubs)  # reached or not, their definitions are cut below
    reach = [body]
    while reach:
        # a name is reached where it stands as a whole word: one of the text's words
        # (one pass over the text, not a search per definition: a fresh process
        # assembles every script before its first call)
        words = set(_WORD.findall(reach.pop()))
        for name, span in blocks.items():
            if name not in needed and name in words:
                needed.add(name)
                reach.append("\n".join(lines[i] for i in span))
    cut = {i for name, span in blocks.items() if name not in needed or name in stubs for i in span}
    kept = "\n".join("" if i in cut else line for i, line in enumerate(lines))
    return kept + "\n" + body


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
