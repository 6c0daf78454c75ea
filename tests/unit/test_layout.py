"""The house's shape, measured from the code: tiers as folders with imports running only
downward, no import cycle, the core free of redis, a small package root, no module
over 450 lines, no private name taken across modules or read on another object, and
storage reached only through plans."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "langgraph_durable"
if not PACKAGE.is_dir():  # run against an installed wheel (.ci/wheel-check): no tree
    pytest.skip("needs the source tree", allow_module_level=True)

# Tiers, lowest first: a module may import its own tier and those below it.
TIERS = {"core": 1, "io": 2, "ledger": 3, "tools": 4, "": 5, "cli": 6}
MAX_ROOT_MODULES = 15
MAX_LINES = 450


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _tier(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in TIERS else ""


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module imported, name taken or "") for every langgraph_durable import,
    including those under TYPE_CHECKING and inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "langgraph_durable":
                found += [(node.lineno, f"langgraph_durable.{a.name}", "") for a in node.names]
            elif node.module.startswith("langgraph_durable."):
                found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, "")
                for a in node.names
                if a.name.startswith("langgraph_durable")
            ]
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_imports_run_only_downward() -> None:
    upward = [
        f"{path.relative_to(PACKAGE)}:{line} ({_tier(_module(path)) or 'root'}) imports "
        f"{target} ({_tier(target) or 'root'})"
        for path in SOURCES
        for line, target, _ in _imports(path)
        if TIERS[_tier(target)] > TIERS[_tier(_module(path))]
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {}
    modules = {_module(p) for p in SOURCES}
    for path in SOURCES:
        targets = set()
        for _, target, name in _imports(path):
            submodule = f"{target}.{name}"
            targets.add(submodule if submodule in modules else target)
        graph[_module(path)] = {t for t in targets if t in modules} - {_module(path)}
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m: str, trail: list[str]) -> bool:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycle.extend(trail[trail.index(t) :] + [m, t] if t in trail else [m, t])
                return True
            if t not in state and visit(t, [*trail, m]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if m not in state and visit(m, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_the_core_never_imports_redis() -> None:
    """Not even through a module it imports: a fresh interpreter loads every core module
    (the package's face, which opens the savers, left out) and redis must not be among
    what it loaded."""
    import subprocess

    core = sorted(_module(p) for p in (PACKAGE / "core").glob("*.py"))
    code = (
        "import sys, types\n"
        "face = types.ModuleType('langgraph_durable')\n"
        f"face.__path__ = [{str(PACKAGE)!r}]\n"
        "sys.modules['langgraph_durable'] = face\n"
        + "".join(f"import {m}\n" for m in core)
        + "print(sorted(n for n in sys.modules if n == 'redis' or n.startswith('redis.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", f"the core tier loaded {out}"


def test_the_package_root_is_small() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_450_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_no_private_name_is_taken_across_modules() -> None:
    taken = [
        f"{path.relative_to(PACKAGE)}:{line} {target}.{name}"
        for path in SOURCES
        for line, target, name in _imports(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not taken, "\n".join(taken)


# Private attributes read on another object, with why each is allowed.
FOREIGN_PRIVATE_ALLOWED = {
    "_replace",  # a NamedTuple's public API, spelled with an underscore
    "_allowed_msgpack_modules",  # LangGraph's serializer keeps its allowlist there (serde.py)
}


def test_no_object_reaches_into_another_objects_private_attributes() -> None:
    """``x._name`` only on ``self`` or ``cls``: an object's private state is its own (the
    ledger once ran on another instance's private methods and a ``copy.copy`` of itself)."""
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr not in FOREIGN_PRIVATE_ALLOWED
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert not found, "\n".join(found)


DATA_COMMANDS = frozenset(
    {"get", "set", "delete", "unlink", "exists", "hget", "hset", "hsetnx", "hdel", "hgetall"}
    | {"hmget", "hkeys", "hlen", "zadd", "zrem", "zcard", "zrange", "zscore", "zrangebylex"}
    | {"sadd", "srem", "smembers", "scan", "scan_iter", "expire", "persist"}
    | {"execute_command", "pipeline"}
)


def test_storage_is_read_and_written_only_through_plans() -> None:
    """Outside the io tier (which runs plans), no module calls Redis on a client itself:
    the command line, the tools and the ledger go through plans like the savers."""
    import re

    direct = re.compile(rf"\.client\.({'|'.join(sorted(DATA_COMMANDS))})\(")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in SOURCES
        if _tier(_module(path)) != "io"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert not found, "\n".join(found)
