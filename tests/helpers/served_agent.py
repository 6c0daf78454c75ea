"""The graph ``tests/integration/test_server.py`` serves with ``langgraph dev``: a ledger with no saver.

A scripted "model" (no LLM) turns the user's message into one tool call: ``"charge N"``
calls ``charge`` (escalate on an unknown outcome), ``"refund N"`` calls ``refund``,
which asks a human through ``interrupt()`` first. Every side effect is a line appended
to ``$LGD_TEST_DIR/effects``, so the test counts them. Before its effect ``charge``
creates ``started-N``; if the test made a FIFO ``gate-N`` it then blocks until the test
opens it for writing, so the test decides when a charge is in flight.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

from langgraph_durable import ToolLedger

ledger = ToolLedger(policies={"charge": "escalate", "refund": "escalate"})


def _dir() -> Path:
    return Path(os.environ["LGD_TEST_DIR"])


def _effect(line: str) -> None:
    with open(_dir() / "effects", "a") as f:
        f.write(line + "\n")


@tool
def charge(amount: int) -> str:
    """Charge the customer's card."""
    (_dir() / f"started-{amount}").touch()
    gate = _dir() / f"gate-{amount}"
    if gate.exists():
        with open(gate) as fifo:  # blocks until the test opens the FIFO for writing
            fifo.read()
    _effect(f"charge {amount}")
    return f"charged {amount}"


@tool
def refund(amount: int) -> str:
    """Refund the customer, once a human approved it."""
    if interrupt({"approve_refund": amount}) != "yes":
        return "refund refused"
    _effect(f"refund {amount}")
    return f"refunded {amount}"


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def model(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if last.type == "tool":
        return {"messages": [AIMessage(f"done: {last.content}")]}
    name, amount = str(last.content).split()
    call = {"name": name, "args": {"amount": int(amount)}, "id": "call_0"}
    return {"messages": [AIMessage("", tool_calls=[call])]}


def route(state: State) -> str:
    return "tools" if state["messages"][-1].tool_calls else END


builder = StateGraph(State)
builder.add_node("model", model)
builder.add_node("tools", ledger.tool_node([charge, refund]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", route, ["tools", END])
builder.add_edge("tools", "model")
graph = builder.compile()  # the server gives it its checkpointer
