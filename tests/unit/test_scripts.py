"""The scripts as Redis runs them (scripts.py ``assemble``): the prelude's key positions
written as numbers and the helpers a script never reaches left out, without leaving
out one it calls. No server: the Lua is read, not run (every script is loaded and run
by the integration tests)."""

from __future__ import annotations

import re

import pytest

from langgraph_durable.io import scripts

KEYWORDS = {
    "and",
    "break",
    "do",
    "else",
    "elseif",
    "end",
    "false",
    "for",
    "function",
    "if",
    "in",
    "local",
    "nil",
    "not",
    "or",
    "repeat",
    "return",
    "then",
    "true",
    "until",
    "while",
}
BUILTINS = {
    "redis",
    "KEYS",
    "ARGV",
    "string",
    "table",
    "math",
    "tonumber",
    "tostring",
    "pcall",
    "unpack",
    "type",
    "ipairs",
    "pairs",
    "error",
    "cjson",
    "bit",
    "struct",
    "cmsgpack",
    "next",
    "select",
    "assert",
    "rawget",
    "rawset",
    "setmetatable",
    "getmetatable",
    "xpcall",
}


def code_of(source: str) -> str:
    """``source`` without comments and with every string literal emptied."""
    out, at = [], 0
    token = re.compile(
        r"--\[(=*)\[.*?\]\1\]|--[^\n]*|'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", re.DOTALL
    )
    for found in token.finditer(source):
        out.append(source[at : found.start()])
        out.append(" " if found.group(0).startswith("--") else '""')
        at = found.end()
    return "".join(out) + source[at:]


@pytest.mark.parametrize("name", scripts.SCRIPT_NAMES)
def test_every_name_a_script_calls_is_defined_in_it(name: str) -> None:
    code = code_of(scripts.script_source(name, flagged=True).replace("#!lua", "--"))
    declared = set(re.findall(r"\blocal\s+function\s+(\w+)", code))
    for group in re.findall(r"\blocal\s+([\w\s,]+?)\s*(?:=|\n|$)", code):
        declared.update(v.strip() for v in group.split(","))
    for group in re.findall(r"\bfor\s+([\w\s,]+?)\s*(?:=|\bin\b)", code):
        declared.update(v.strip() for v in group.split(","))
    for group in re.findall(r"\bfunction\s*\w*\s*\(([^)]*)\)", code):
        declared.update(v.strip() for v in group.split(","))
    called = set(re.findall(r"(?<![\w.:])([A-Za-z_]\w*)\s*\(", code)) - KEYWORDS - BUILTINS
    assert called <= declared, f"{name} calls {sorted(called - declared)}, left out"
    assert not re.search(r"\b(K_[A-Z]+|TWIN)\b", code), "a key position left as a name"


def test_a_helper_left_out_is_one_nothing_reaches() -> None:
    prelude = """local K_A, K_B = 1, 2
local function one() return 1 end
local function two()
  return one() + KEYS[K_B]
end
local T = {
  'x',
}
local function three() return T end
local function unused()
  return 3
end"""
    source = scripts.assemble(prelude, "return two() + KEYS[K_A]")
    assert "local function one()" in source and "local function two()" in source
    assert "KEYS[2]" in source and source.endswith("return two() + KEYS[1]")
    assert "unused" not in source and "local T" not in source and "'x'" not in source
    assert source.count("\n") == 12, "every line kept, blank where cut"


def test_a_helper_is_reached_by_its_whole_name_only() -> None:
    """A definition is kept where its name stands as a word of the code that reaches
    it, not where it is part of a longer name."""
    prelude = """local K_A = 1
local function one() return 1 end
local function someone() return 2 end
local function other() return 3 end"""
    source = scripts.assemble(prelude, "return someone() + one_more + other_one")
    assert "local function someone()" in source
    assert "local function one()" not in source and "local function other()" not in source


@pytest.mark.parametrize("name", list(scripts.COMPACT_LAYOUTS))
def test_a_compact_variant_reaches_only_the_keys_of_its_layout_and_refuses_a_ttl(
    name: str,
) -> None:
    full = code_of(scripts.script_source(name))
    compact = scripts.script_source(name + scripts.COMPACT)
    first_line = compact.split("\n", 1)[0]
    assert first_line.startswith("if ARGV[1] ~= '0' then return redis.error_reply('LGD_LAYOUT")
    code = code_of(compact)
    layout = scripts.COMPACT_LAYOUTS[name]
    positions = {int(p) for p in re.findall(r"KEYS\[(\d+)", code)}
    # every position of the layout, and 99 (a key left out) only where no call reaches
    assert positions - {99} <= set(range(1, len(layout) + 1))
    assert len(re.findall(r"KEYS\[(\d+)", code)) <= len(re.findall(r"KEYS\[(\d+)", full))
    for stub in ("arm", "touch", "persist", "repair"):
        assert not re.search(rf"\blocal function {stub}\b", code), f"{stub} made at every call"
    # the body is the full script's, unchanged
    assert compact.endswith(scripts.script_source(name).rsplit("\n", 1)[-1])
