"""The demo's agent: a scripted chat model, side-effecting tools and the world they touch.

Owns what the crash-and-resume demo (``demo.py``) runs: a chat model that plays
``SCRIPT`` (no network, no API key), the tools (a card charge with policy ``retry``, an
e-mail with ``escalate``, a report file, a read-only search), the ``World`` of files
their effects land in, and the operator who answers an escalation by checking the
outbox. The notebooks build on the same pieces.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from langgraph_durable.ledger import ToolLedger, idempotency_key

# Set for the worker that is killed: its mail server hangs once it starts sending, so the
# kill always lands mid-e-mail, however slow or loaded the machine (no timed kill).
HANG_ENV = "LGD_DEMO_HANG_MAIL"
SENDING = "email-sending"  # the marker the hanging e-mail leaves before it hangs

# What the scripted model asks for, round by round (each round's calls run in parallel).
SCRIPT: list[list[dict[str, Any]]] = [
    [{"name": "search", "args": {"query": "crash-safe agents"}}],
    [
        {"name": "charge_card", "args": {"customer": "acme", "cents": 4900}},
        {"name": "send_email", "args": {"to": "team@acme.example", "subject": "research started"}},
    ],
    [
        {"name": "write_report", "args": {"title": "Crash-safe agents"}},
        {"name": "send_email", "args": {"to": "boss@acme.example", "subject": "report ready"}},
    ],
]
POLICIES: dict[str, Any] = {"charge_card": "retry", "search": "readonly"}
SIDE_EFFECTS = {"charge_card", "send_email", "write_report"}


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays ``SCRIPT``: the n-th answer for the n-th AI turn."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn < len(SCRIPT):
            calls = [{**c, "id": f"call_{i}"} for i, c in enumerate(SCRIPT[turn])]
            message = AIMessage(content=f"step {turn + 1}", tool_calls=calls)
        else:
            message = AIMessage(content="Report written, team and boss informed.")
        return ChatResult(generations=[ChatGeneration(message=message)])


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class World:
    """The outside world the tools change: a JSONL log of effects, one line per effect."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.log = directory / "effects.jsonl"

    def record(self, tool: str, **fields: Any) -> None:
        line = json.dumps({"tool": tool, "key": idempotency_key(), "pid": os.getpid(), **fields})
        with self.log.open("a") as f:
            f.write(line + "\n")

    def mark(self, name: str) -> None:
        (self.directory / f"{name}.mark").touch()

    def marked(self, name: str) -> bool:
        return (self.directory / f"{name}.mark").exists()

    def effects(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


def make_tools(world: World, delay: float) -> list[StructuredTool]:
    def search(query: str) -> str:
        time.sleep(delay / 2)
        return f"3 papers on {query}"

    def charge_card(customer: str, cents: int) -> str:
        # An idempotent payment API: a request repeating an idempotency key is a no-op.
        if not any(e["key"] == idempotency_key() for e in world.effects()):
            world.record("charge_card", customer=customer, cents=cents)
        return f"charged {customer} {cents / 100:.2f} USD"

    def send_email(to: str, subject: str) -> str:
        if os.environ.get(HANG_ENV):
            world.mark(SENDING)
            threading.Event().wait()  # the mail server hangs until the worker is killed
        time.sleep(delay)  # the mail server is slow
        world.record("send_email", to=to, subject=subject)
        return f"mailed {to}"

    def write_report(title: str) -> str:
        path = world.directory / "report.md"
        with path.open("a") as f:
            f.write(f"# {title}\n")
        world.record("write_report", path=str(path))
        return f"wrote {path.name}"

    return [
        StructuredTool.from_function(func=fn, name=fn.__name__, description=fn.__name__)
        for fn in (search, charge_card, send_email, write_report)
    ]


def research_agent(
    ledger: ToolLedger, world: World, delay: float = 0.5, wrap: Any = None
) -> StateGraph:
    """The agent graph; ``wrap`` replaces ``ledger.wrap_tool_call`` (to watch it)."""
    model = ScriptedChatModel()

    def agent(state: AgentState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: AgentState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node(
        "tools",
        ToolNode(
            make_tools(world, delay),
            wrap_tool_call=wrap or ledger.wrap_tool_call,
            awrap_tool_call=ledger.awrap_tool_call,
        ),
    )
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def operator_answer(value: dict[str, Any], world: World) -> dict[str, Any]:
    """The human on call: checks the outbox for the call's idempotency key."""
    sent = [e for e in world.effects() if e["key"] == value["idempotency_key"]]
    if sent:
        return {"action": "skip", "result": f"mailed {value['args']['to']}"}
    return {"action": "retry"}
