"""Stored text never drives the operator's terminal: the human output of every command
shows control characters, C1 controls and bidi overrides as visible escapes, while
``--json`` keeps the exact text.

The data is written by a real compiled graph through the real saver and ``ToolLedger``:
a thread id, a model answer, a tool's arguments and result, an escalated call's
arguments and a drop's reason each carry an OSC title sequence, a carriage return that
would overwrite the line, a one-byte C1 CSI and a right-to-left override."""

from __future__ import annotations

import errno
import json
import os
import re
import select
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.graphs import counter_graph
from tests.helpers.ledger_crashes import Crash

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "langgraph_durable.cli"]

HOSTILE = "\x1b]0;pwned\x07\r\x1b[2K all checks passed\x9b31m\u202eevil"
THREAD = "t" + HOSTILE
MISSING = "gone" + HOSTILE  # a thread id that names nothing
SHOWN = "\\x1b]0;pwned\\x07\\r\\x1b[2K all checks passed\\x9b31m\\u202eevil"  # as escaped

# Anything a terminal acts on instead of showing; "\n" ends our own lines.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return "found" + HOSTILE


def model_answer(messages: list[AnyMessage]) -> AIMessage:
    """The 'model': look up, then send, then finish (by the tool results so far)."""
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done == 0:
        call = {"name": "lookup", "args": {"query": HOSTILE}, "id": "call_0"}
        return AIMessage(content="ask" + HOSTILE, tool_calls=[call])
    if done == 1:
        call = {"name": "send", "args": {"to": HOSTILE}, "id": "call_1"}
        return AIMessage(content="send it", tool_calls=[call])
    return AIMessage(content="all done")


def hostile_graph(saver: RedisSaver, ledger: ToolLedger, crashes: list[str]) -> Any:
    model = ledger.model(RunnableLambda(model_answer))

    @tool
    def send(to: str) -> str:
        """Send something (not idempotent: an unknown outcome escalates)."""
        if crashes:
            crashes.pop()
            raise Crash("the worker dies mid-call")
        return "sent"

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ledger.tool_node([lookup, send]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


@pytest.fixture
def hostile(saver: RedisSaver, redis_url: str) -> dict[str, Any]:
    """THREAD written by the graph: a looked-up result, a call of ``send`` waiting for a
    human (its worker died mid-call), the first model answer dropped with a reason."""
    ledger = ToolLedger(saver)
    graph = hostile_graph(saver, ledger, crashes=["once"])
    config = {"configurable": {"thread_id": THREAD}}
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="hi" + HOSTILE)]}, config)
    assert graph.invoke(None, config).get("__interrupt__")  # send's outcome is unknown
    (waiting,) = ledger.escalations([THREAD])
    first = next(e for e in ledger.entries(THREAD) if e.model_call)
    ledger.drop(THREAD, str(first.idempotency_key), reason="why" + HOSTILE, by="ops" + HOSTILE)
    env = {**os.environ, "REDIS_URL": redis_url, "PYTHONIOENCODING": "utf-8"}
    return {"env": env, "prefix": ["--key-prefix", saver.key_prefix], "key": waiting}


def run(hostile: dict[str, Any], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args, *hostile["prefix"]],
        env=hostile["env"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=180,
        check=False,
    )


def assert_clean(text: str) -> None:
    found = UNSAFE.search(text)
    assert found is None, f"raw {found.group()!r} reached the terminal: {text!r}"


def human(hostile: dict[str, Any], *args: str, code: int = 0) -> str:
    """The command's human output, stdout then stderr, each checked clean."""
    done = run(hostile, *args)
    assert done.returncode == code, done.stdout + done.stderr
    assert_clean(done.stdout)
    assert_clean(done.stderr)
    return done.stdout + done.stderr


def as_json(hostile: dict[str, Any], *args: str) -> Any:
    done = run(hostile, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_printable_escapes_controls_and_bidi_and_keeps_other_text() -> None:
    from langgraph_durable.cli.common import printable  # here: the other tests run without it

    assert printable(HOSTILE) == SHOWN
    assert printable("a\tb\nc\x00\x7f\x85\u2028\u2029\u2066\u2069") == (
        "a\\tb\\nc\\x00\\x7f\\x85\\u2028\\u2029\\u2066\\u2069"
    )
    assert printable("café 東京 naïve — ok \\x1b") == "café 東京 naïve — ok \\x1b"
    assert printable(printable(HOSTILE)) == SHOWN  # twice is once
    assert printable(42) == "42"


def test_threads(hostile: dict[str, Any]) -> None:
    assert SHOWN in human(hostile, "threads")
    (row,) = as_json(hostile, "threads")
    assert row["thread_id"] == THREAD


def test_show(hostile: dict[str, Any]) -> None:
    text = human(hostile, "show", THREAD)
    assert "hi" + SHOWN in text and "ai: ask" + SHOWN in text and "found" + SHOWN in text
    messages = as_json(hostile, "show", THREAD)["values"]["messages"]
    assert "human: hi" + HOSTILE in messages and "tool: found" + HOSTILE in messages
    assert any(m.startswith("ai: ask" + HOSTILE) for m in messages)
    human(hostile, "history", THREAD)  # nothing stored there is free text; clean all the same


def test_ledger(hostile: dict[str, Any]) -> None:
    text = human(hostile, "ledger", THREAD)
    assert "found" + SHOWN[:30] in text  # the RESULT column keeps 40 characters
    assert f"dropped by ops{SHOWN}: why{SHOWN}" in text
    rows = as_json(hostile, "ledger", THREAD)
    looked_up = next(r for r in rows if r["tool"] == "lookup")
    assert looked_up["args"] == {"query": HOSTILE} and looked_up["result"] == "found" + HOSTILE
    (dropped,) = [r for r in rows if r["drops"]]
    assert (dropped["drops"][0]["by"], dropped["drops"][0]["reason"]) == (
        "ops" + HOSTILE,
        "why" + HOSTILE,
    )


def test_escalations(hostile: dict[str, Any]) -> None:
    text = human(hostile, "escalations")
    assert SHOWN in text and "send" in text
    (row,) = as_json(hostile, "escalations")
    assert (row["thread_id"], row["args"]) == (THREAD, {"to": HOSTILE})
    assert SHOWN in human(hostile, "escalations", "--thread", THREAD)


def test_resolve_and_its_errors(hostile: dict[str, Any], saver: RedisSaver) -> None:
    key = str(hostile["key"].idempotency_key)
    wrong = human(hostile, "resolve", THREAD, "lgd-nope" + HOSTILE, "--retry", code=2)
    assert len(wrong.strip().splitlines()) == 1 and "\\x1b]0;pwned" in wrong
    with saver.lease(THREAD):  # a worker holds the thread: one line naming it
        held = human(hostile, "resolve", THREAD, key, "--retry", code=2)
    assert len(held.strip().splitlines()) == 1 and "\\x1b]0;pwned" in held
    human(hostile, "resolve", THREAD, key, "--skip", "sent" + HOSTILE, "--reason", "why" + HOSTILE)
    assert f"skip by ?: why{SHOWN}" in human(hostile, "ledger", THREAD)
    (row,) = [r for r in as_json(hostile, "ledger", THREAD) if r["tool"] == "send"]
    assert row["decisions"][0]["reason"] == "why" + HOSTILE


def test_drop_and_its_errors(hostile: dict[str, Any]) -> None:
    wrong = human(hostile, "drop", THREAD, "lgd-nope" + HOSTILE, "--reason", "x", code=2)
    assert len(wrong.strip().splitlines()) == 1 and "\\x1b]0;pwned" in wrong
    answer = next(
        r for r in as_json(hostile, "ledger", THREAD) if r["tool"] == "model" and not r["drops"]
    )
    done = human(hostile, "drop", THREAD, answer["idempotency_key"], "--reason", "r" + HOSTILE)
    assert "DROPPED" in done
    assert f"dropped by ?: r{SHOWN}" in human(hostile, "ledger", THREAD)


def test_verify(hostile: dict[str, Any]) -> None:
    assert f"t{SHOWN}: ok" in human(hostile, "verify", THREAD)
    assert f"t{SHOWN}: ok" in human(hostile, "verify", "--all")
    missing = human(hostile, "verify", MISSING, code=1)
    assert f"gone{SHOWN}: no such thread" in missing
    (row,) = as_json(hostile, "verify", THREAD)
    assert row["thread_id"] == THREAD and row["ok"]


def test_errors_that_name_a_thread_or_a_path(hostile: dict[str, Any], tmp_path: Path) -> None:
    for args in (["show", MISSING], ["history", MISSING], ["ledger", MISSING]):
        assert "pwned" in human(hostile, *args, code=1)
    path = str(tmp_path / ("keys" + HOSTILE))
    text = human(hostile, "threads", "--signing-key-file", path, code=2)
    assert "\\x1b]0;pwned" in text


def on_pty(args: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Run the CLI with a pseudo-terminal as stdin, stdout and stderr (so click strips
    nothing): everything it wrote, read until the last copy of the terminal closes."""
    parent, child = os.openpty()
    proc = subprocess.Popen(
        [*CLI, *args], stdin=child, stdout=child, stderr=child, env=env, cwd=ROOT
    )
    os.close(child)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([parent], [], [], 180)  # a safety net: EOF ends it
            assert ready, "the CLI wrote nothing for 180 s"
            try:
                chunk = os.read(parent, 65536)
            except OSError as exc:  # EIO: the process and its children closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(parent)
    return proc.wait(timeout=180), b"".join(chunks)


@pytest.mark.parametrize("command", [["threads"], ["show", THREAD], ["ledger", THREAD]])
def test_no_escape_byte_reaches_a_real_terminal(
    hostile: dict[str, Any], command: list[str]
) -> None:
    code, written = on_pty([*command, *hostile["prefix"]], hostile["env"])
    assert code == 0, written
    assert b"\x1b" not in written and b"\x07" not in written
    assert re.search(rb"\r(?!\n)", written) is None  # the terminal's own CRLF only
    text = written.decode()
    assert "\x9b" not in text and "\u202e" not in text
    assert "\\x1b]0;pwned\\x07" in text


def test_migrate_shows_a_source_thread_escaped_on_a_real_terminal(
    hostile: dict[str, Any], tmp_path: Path
) -> None:
    """The progress bar names the thread being copied (only on a terminal); the bar itself
    may use escape sequences (hiding the cursor), the thread id may not."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = str(tmp_path / "source.db")
    with SqliteSaver.from_conn_string(db) as source:
        graph = counter_graph().compile(checkpointer=source)
        graph.invoke({"value": 1, "trail": []}, {"configurable": {"thread_id": MISSING}})
    args = ["migrate", "--from", f"sqlite:///{db}", *hostile["prefix"]]
    code, written = on_pty(args, hostile["env"])
    assert code == 0, written
    assert b"\x1b]" not in written and b"\x07" not in written  # no OSC from the thread id
    assert b"\x1b[2K all" not in written
    text = written.decode()
    assert "\x9b" not in text and "\u202e" not in text
    assert "gone\\x1b]0;pwned\\x07" in text
    copied = {t["thread_id"] for t in as_json(hostile, "threads")}  # exactly, next to THREAD
    assert copied == {THREAD, MISSING}
