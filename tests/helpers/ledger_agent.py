"""A ToolNode agent whose tools have real side effects (lines appended to a file).

Shared by the ledger tests, the SIGKILL worker and the soak script. Every round the
'model' asks for three parallel calls, reusing the provider-style ids call_0..call_2:
  - charge(amount)       an idempotent API: it deduplicates by idempotency key (retry)
  - send_email(to, body) not idempotent (escalate)
  - create_ticket(title) not idempotent, the same arguments every round (escalate)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from langgraph_durable import ToolLedger, idempotency_key

ROUNDS = 3
POLICIES: dict[str, Any] = {"charge": "retry"}
NON_IDEMPOTENT = ("send_email", "create_ticket")


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def planned_calls(round_: int) -> list[dict[str, Any]]:
    return [
        {"name": "charge", "args": {"amount": 10 * (round_ + 1)}, "id": "call_0"},
        {"name": "send_email", "args": {"to": f"user{round_}@example.com"}, "id": "call_1"},
        {"name": "create_ticket", "args": {"title": "follow up"}, "id": "call_2"},
    ]


def output_of(name: str, args: dict[str, Any]) -> str:
    """What each tool returns: the harness answers escalations with it."""
    if name == "charge":
        return f"charged {args['amount']}"
    if name == "send_email":
        return f"sent to {args['to']}"
    return f"ticket {args['title']!r} opened"


class Effects:
    """The outside world: an append-only file of effect lines (one write per line)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def append(self, **line: Any) -> None:
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def lines(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.strip()]


def make_tools(
    effects: Effects, hook: Callable[..., None] = lambda point, tool="": None, delay: float = 0.0
) -> list[StructuredTool]:
    def charge(amount: int) -> str:
        hook("tool_start", "charge")
        key = idempotency_key()
        effects.append(tool="charge", kind="attempt", key=key, args={"amount": amount})
        # an idempotent API: a second request with the same key changes nothing
        if not any(
            e["kind"] == "effect" and e["key"] == key and e["tool"] == "charge"
            for e in effects.lines()
        ):
            effects.append(tool="charge", kind="effect", key=key, args={"amount": amount})
        time.sleep(delay)
        hook("tool_after_effect", "charge")
        return output_of("charge", {"amount": amount})

    def send_email(to: str) -> str:
        hook("tool_start", "send_email")
        time.sleep(delay)
        effects.append(tool="send_email", kind="effect", key=idempotency_key(), args={"to": to})
        hook("tool_after_effect", "send_email")
        return output_of("send_email", {"to": to})

    def create_ticket(title: str) -> str:
        hook("tool_start", "create_ticket")
        effects.append(
            tool="create_ticket", kind="effect", key=idempotency_key(), args={"title": title}
        )
        time.sleep(delay)
        hook("tool_after_effect", "create_ticket")
        return output_of("create_ticket", {"title": title})

    return as_tools(charge, send_email, create_ticket)


def as_tools(*functions: Callable[..., str]) -> list[StructuredTool]:
    """Each function as a tool with a sync and an async implementation."""
    tools = []
    for fn in functions:

        async def coroutine(_fn: Callable[..., str] = fn, **kwargs: Any) -> str:
            await asyncio.sleep(0)
            return _fn(**kwargs)

        tools.append(
            StructuredTool.from_function(
                func=fn, coroutine=coroutine, name=fn.__name__, description=fn.__name__
            )
        )
    return tools


def agent(state: AgentState) -> dict[str, Any]:
    rounds = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in state["messages"])
    if rounds >= ROUNDS:
        return {"messages": [AIMessage(content="all done")]}
    return {"messages": [AIMessage(content=f"round {rounds}", tool_calls=planned_calls(rounds))]}


def route(state: AgentState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(
    ledger: ToolLedger | None,
    effects: Effects,
    *,
    hook: Callable[..., None] = lambda point, tool="": None,
    delay: float = 0.0,
    wrap: Callable[[Any, Any], Any] | None = None,
    awrap: Callable[[Any, Any], Any] | None = None,
) -> StateGraph:
    tools = make_tools(effects, hook, delay)
    if ledger is None:
        node = ToolNode(tools)
    else:
        node = ToolNode(
            tools,
            wrap_tool_call=wrap or ledger.wrap_tool_call,
            awrap_tool_call=awrap or ledger.awrap_tool_call,
        )
    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


START_INPUT = {"messages": [HumanMessage(content="do the chores")]}


def answer(value: dict[str, Any], effects: Effects) -> dict[str, Any]:
    """A human answering an escalation from the world's record of what happened."""
    done = any(
        e["kind"] == "effect" and e["key"] == value["idempotency_key"] for e in effects.lines()
    )
    if done:
        return {"action": "skip", "result": output_of(value["name"], value["args"])}
    return {"action": "retry"}


def normalized(messages: list[AnyMessage]) -> list[tuple[Any, ...]]:
    """Messages without their random ids, for comparing runs."""
    out = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(("tool", m.content, m.tool_call_id, m.name, m.status))
        elif isinstance(m, AIMessage):
            calls = [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
            out.append(("ai", m.content, calls))
        else:
            out.append((m.type, m.content))
    return out
