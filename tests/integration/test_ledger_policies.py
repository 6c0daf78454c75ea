"""A tool's own hints choose its ledger policy; explicit ``policies=`` win.

Hints live in LangChain ``BaseTool.metadata`` under the MCP ``ToolAnnotations`` names,
flat, as langchain-mcp-adapters puts an MCP server's annotations there.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver, ToolLedger
from langgraph_durable.ledger.policies import hinted_policy
from tests.helpers.ledger_crashes import CONFIG, Crash
from tests.integration.test_ledger import chain_graph, crash_at, together


def mcp_metadata(**hints: Any) -> dict[str, Any]:
    """``tool.metadata`` as langchain-mcp-adapters builds it: ``ToolAnnotations.model_dump()``."""
    base = {"title": None, "readOnlyHint": None, "destructiveHint": None}
    return {**base, "idempotentHint": None, "openWorldHint": None, **hints}


@pytest.mark.parametrize(
    ("metadata", "policy"),
    [
        (mcp_metadata(readOnlyHint=True), "readonly"),
        ({"readOnlyHint": True}, "readonly"),  # hand-written LangChain metadata
        (mcp_metadata(idempotentHint=True), "retry"),
        (mcp_metadata(idempotentHint=True, destructiveHint=True), "retry"),
        (mcp_metadata(destructiveHint=True), "escalate"),
        (mcp_metadata(readOnlyHint=True, destructiveHint=True), "escalate"),  # contradiction
        (mcp_metadata(readOnlyHint="yes", idempotentHint=1), None),  # only True counts
        (mcp_metadata(), None),
        (None, None),
    ],
)
def test_hints_map_to_policies(metadata: Any, policy: str | None) -> None:
    tool = StructuredTool.from_function(func=lambda: "", name="t", description="t")
    tool.metadata = metadata
    assert hinted_policy(tool) == policy


class State(TypedDict):
    messages: Annotated[list[Any], lambda a, b: a + b]


CALLS = [
    {"name": "lookup", "args": {"q": "stock"}, "id": "call_0"},
    {"name": "charge", "args": {"cents": 500}, "id": "call_1"},
    {"name": "ship", "args": {"item": "book"}, "id": "call_2"},
]


def shop_graph(ledger: ToolLedger, done: list[str], hook: Any) -> Any:
    """One AI message asks three tools at once: read-only, idempotent, destructive."""

    def make(name: str, metadata: dict[str, Any]) -> StructuredTool:
        def run(**kwargs: Any) -> str:
            hook("tool_start", name)
            done.append(name)
            return f"{name} ok"

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=name,
            args_schema={"type": "object", "properties": {k: {} for k in ("q", "cents", "item")}},
            metadata=metadata,
        )

    tools = [
        make("lookup", mcp_metadata(readOnlyHint=True)),
        make("charge", mcp_metadata(idempotentHint=True)),
        make("ship", mcp_metadata(destructiveHint=True)),
    ]

    def model(state: State) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=CALLS)]}

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode(tools, wrap_tool_call=together(ledger.wrap_tool_call)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=ledger.saver)


def crash_and_resume(ledger: ToolLedger) -> tuple[list[str], list[str]]:
    """charge and ship die between their intent and their effect; resume, answering
    every question with retry. Returns what was asked and what ran."""
    done: list[str] = []
    graph = shop_graph(ledger, done, crash_at("tool_start", "charge", "ship"))
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="buy")]}, CONFIG)
    asked: list[str] = []
    out = graph.invoke(None, CONFIG)
    while out.get("__interrupt__"):
        asked += [i.value["name"] for i in out["__interrupt__"]]
        out = graph.invoke(Command(resume={"action": "retry"}), CONFIG)
    assert out["messages"][-1].content == "done"
    return asked, done


def test_hinted_tools_get_their_policies_in_a_parallel_task(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)
    asked, done = crash_and_resume(ledger)
    assert asked == ["ship"]  # charge is idempotent: retried without asking
    # a read-only call is not guarded: it ran on each of the task's three attempts
    assert sorted(done) == ["charge", "lookup", "lookup", "lookup", "ship"]
    entries = {e.name: e for e in ledger.entries("t")}
    assert set(entries) == {"charge", "ship"}  # a read-only tool is never recorded
    assert (entries["charge"].hint, entries["charge"].attempts) == ("retry", 2)
    assert (entries["ship"].resolution, entries["ship"].attempts) == ("retry", 2)


@pytest.mark.parametrize(
    "options",
    [{"policies": {"lookup": "escalate", "charge": "escalate"}}, {"use_tool_hints": False}],
)
def test_explicit_policies_win_and_hints_can_be_ignored(
    saver: RedisSaver, options: dict[str, Any]
) -> None:
    ledger = ToolLedger(saver, **options)
    asked, done = crash_and_resume(ledger)
    assert asked == ["charge", "ship"]
    assert sorted(done) == ["charge", "lookup", "ship"]  # lookup recorded: replayed
    assert {e.name for e in ledger.entries("t")} == {"lookup", "charge", "ship"}
    assert ledger.policy("lookup") == "escalate"


class Log(TypedDict):
    log: Annotated[list[str], lambda a, b: a + b]


def test_a_durable_calls_own_policy_decides_its_unknown_outcome(saver: RedisSaver) -> None:
    """``@ledger.durable(policy="retry")`` retries a lost call without asking, though the
    ledger's default (and its policy by name) is ``escalate``."""
    ledger = ToolLedger(saver)
    world: list[str] = []
    crash = [True]

    @ledger.durable(name="refund", policy="retry")
    def refund(amount: int) -> str:
        world.append(f"refund {amount}")
        if crash:
            crash.pop()
            raise Crash("after the effect")
        return f"refunded {amount}"

    graph = chain_graph(Log, lambda s: {"log": [refund(5)]}).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"log": []}, CONFIG)
    out = graph.invoke(None, CONFIG)
    assert "__interrupt__" not in out and out["log"] == ["refunded 5"]
    assert world == ["refund 5", "refund 5"]
    (entry,) = ledger.entries("t")
    assert (entry.attempts, entry.escalations) == (2, ())
