"""Agents for the ledger's decision probes (tests/integration/test_ledger_decide.py and
tests/workers/subgraph_worker.py): a model that answers from its request with fresh ids,
an agent that asks a human before the model, and the agent as a compiled subgraph."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.journal_agent import AgentState
from tests.helpers.ledger_crashes import Crash


class EchoModel(BaseChatModel):
    """Asks for ``trade(item=...)`` with the item named by the newest system message, once;
    then says it is done. Fresh ids on every call."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "echo"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.calls += 1
        if any(m.type == "tool" for m in messages):
            message = AIMessage(content="done", id=f"m-{uuid.uuid4().hex}")
        else:
            item = next(m.content for m in reversed(messages) if isinstance(m, SystemMessage))
            call = {"name": "trade", "args": {"item": item}, "id": f"c-{uuid.uuid4().hex[:8]}"}
            message = AIMessage(content="", tool_calls=[call], id=f"m-{uuid.uuid4().hex}")
        return ChatResult(generations=[ChatGeneration(message=message)])


def trade_tool(done: Callable[[str], None]) -> StructuredTool:
    def trade(item: str) -> str:
        """Place a trade."""
        done(item)
        return f"traded {item}"

    return StructuredTool.from_function(trade)


def interrupting_agent(
    saver: RedisSaver, model: EchoModel, done: list[str], crash_after_model: list[int]
) -> Any:
    """agent: asks a human which item, then the (journaled) model; tools: the trade."""
    ledger = ToolLedger(saver, policies={"trade": "escalate"})
    journaled = ledger.model(model)

    def agent(state: AgentState) -> dict[str, Any]:
        if any(m.type == "tool" for m in state["messages"]):
            return {"messages": [journaled.invoke(state["messages"])]}
        item = interrupt("which item?")
        answer = journaled.invoke([*state["messages"], SystemMessage(item)])
        if crash_after_model[0]:
            crash_after_model[0] -= 1
            raise Crash("after the model's answer was journaled")
        return {"messages": [answer]}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ledger.tool_node([trade_tool(done.append)]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def subgraph_agent(saver: RedisSaver, model: EchoModel, done: Callable[[str], None]) -> Any:
    """The agent as a compiled subgraph node of a parent graph."""
    ledger = ToolLedger(saver, policies={"trade": "escalate"})
    journaled = ledger.model(model)

    def agent(state: AgentState) -> dict[str, Any]:
        return {"messages": [journaled.invoke([*state["messages"], SystemMessage("X")])]}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    inner = StateGraph(AgentState)
    inner.add_node("agent", agent)
    inner.add_node("tools", ledger.tool_node([trade_tool(done)]))
    inner.add_edge(START, "agent")
    inner.add_conditional_edges("agent", route, ["tools", END])
    inner.add_edge("tools", "agent")
    outer = StateGraph(AgentState)
    outer.add_node("research", inner.compile())
    outer.add_edge(START, "research")
    outer.add_edge("research", END)
    return outer.compile(checkpointer=saver)
