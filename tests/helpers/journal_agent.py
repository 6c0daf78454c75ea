"""A chat model that never answers the same way twice, and the two agents it drives.

Shared by the model-journal tests and their SIGKILL worker. ``RandomModel`` asks, for
each of ``ROUNDS`` rounds, for three tool calls with fresh tool-call ids and freshly
worded arguments (as a real model does when asked again), then ends the conversation.
The tools write their effects to an ``Effects`` file:
  - charge(amount, memo)     an idempotent API: it deduplicates by idempotency key (retry)
  - send_email(to, body)     not idempotent (escalate)
  - create_ticket(title)     not idempotent (escalate)
``agent_graph(kind, ...)`` builds either LangChain's ``create_agent`` with
``ledger.middleware()`` or a hand-written StateGraph + ToolNode agent with
``ledger.model(...)`` and ``ledger.tool_node(...)``.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import ToolLedger, idempotency_key
from tests.helpers.ledger_agent import Effects, as_tools

ROUNDS = 2
POLICIES: dict[str, Any] = {"charge": "retry"}
NON_IDEMPOTENT = ("send_email", "create_ticket")
TOOLS = ("charge", *NON_IDEMPOTENT)
Hook = Callable[..., None]
_WORDS = ("please", "kindly", "now", "asap", "today", "soon", "again", "thanks", "urgent")


def _noop(point: str, tool: str = "") -> None:
    return None


def _phrase(rng: random.Random, head: str) -> str:
    return " ".join([head, *rng.sample(_WORDS, 3), uuid.uuid4().hex[:6]])


def rounds_in(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in messages)


class RandomModel(BaseChatModel):
    """A fake chat model that answers differently on every call: fresh tool-call ids and
    differently worded arguments. ``hook`` is called at ``model_start`` and at
    ``model_answered`` (the answer exists, nothing has recorded it yet)."""

    hook: Hook = _noop
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "random-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(bound_tools=[getattr(t, "name", str(t)) for t in tools])

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        self.hook("model_start")
        self.calls += 1
        rng = random.Random(uuid.uuid4().int)
        round_ = rounds_in(messages)
        if round_ >= ROUNDS:
            return AIMessage(content=_phrase(rng, "all done"))
        calls = [
            {"name": "charge", "args": {"amount": 10 * (round_ + 1), "memo": _phrase(rng, "fee")}},
            {
                "name": "send_email",
                "args": {"to": f"user{round_}@example.com", "body": _phrase(rng, "hi")},
            },
            {"name": "create_ticket", "args": {"title": _phrase(rng, "follow up")}},
        ]
        for call in calls:
            call["id"] = f"call_{uuid.uuid4().hex[:12]}"
        return AIMessage(content=_phrase(rng, f"round {round_}"), tool_calls=calls)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        answer = self._answer(messages)
        self.hook("model_answered")
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        """The answer in two chunks: its text, then its tool calls as call chunks."""
        answer = self._answer(messages)
        yield ChatGenerationChunk(message=AIMessageChunk(content=answer.content))
        chunks = [
            {"index": i, "id": c["id"], "name": c["name"], "args": json.dumps(c["args"])}
            for i, c in enumerate(answer.tool_calls)
        ]
        self.hook("model_answered")
        yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))


def output_of(name: str, args: dict[str, Any]) -> str:
    """What each tool returns: escalations are answered with it."""
    if name == "charge":
        return f"charged {args['amount']} ({args['memo']})"
    if name == "send_email":
        return f"sent to {args['to']}: {args['body']}"
    return f"ticket {args['title']!r} opened"


def make_tools(effects: Effects, hook: Hook = _noop) -> list[StructuredTool]:
    def charge(amount: int, memo: str) -> str:
        hook("tool_start", "charge")
        key = idempotency_key()
        args = {"amount": amount, "memo": memo}
        effects.append(tool="charge", kind="attempt", key=key, args=args)
        # an idempotent API: a second request with the same key changes nothing
        if not any(e["kind"] == "effect" and e["key"] == key for e in effects.lines()):
            effects.append(tool="charge", kind="effect", key=key, args=args)
        hook("tool_after_effect", "charge")
        return output_of("charge", args)

    def send_email(to: str, body: str) -> str:
        hook("tool_start", "send_email")
        args = {"to": to, "body": body}
        effects.append(tool="send_email", kind="effect", key=idempotency_key(), args=args)
        hook("tool_after_effect", "send_email")
        return output_of("send_email", args)

    def create_ticket(title: str) -> str:
        hook("tool_start", "create_ticket")
        args = {"title": title}
        effects.append(tool="create_ticket", kind="effect", key=idempotency_key(), args=args)
        hook("tool_after_effect", "create_ticket")
        return output_of("create_ticket", args)

    return as_tools(charge, send_email, create_ticket)


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def toolnode_graph(
    ledger: ToolLedger,
    model: BaseChatModel,
    tools: list[Any],
    hook: Hook = _noop,
    journal: bool = True,
) -> StateGraph:
    """A hand-written agent: its node calls ``ledger.model(model).bind_tools(tools)``
    (``invoke`` in a sync run, ``astream`` in an async one), its tools run in
    ``ledger.tool_node(tools)``."""
    journaled = (ledger.model(model) if journal else model).bind_tools(tools)

    def agent(state: AgentState) -> dict[str, Any]:
        answer = journaled.invoke(state["messages"])
        hook("after_journal")
        return {"messages": [answer]}

    async def aagent(state: AgentState) -> dict[str, Any]:
        whole = None
        async for chunk in journaled.astream(state["messages"]):
            whole = chunk if whole is None else whole + chunk
        hook("after_journal")
        return {"messages": [AIMessage(content=whole.content, tool_calls=whole.tool_calls)]}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(AgentState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ledger.tool_node(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def create_agent_graph(
    ledger: ToolLedger,
    model: BaseChatModel,
    tools: list[Any],
    checkpointer: Any,
    hook: Hook = _noop,
    journal: bool = True,
) -> Any:
    """LangChain's ``create_agent`` with ``ledger.middleware()``; an outer middleware marks
    the boundaries around the ledger's (``before_intent``, ``after_result``,
    ``after_journal``)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    class Boundaries(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            hook("after_journal")
            return response

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            response = await handler(request)
            hook("after_journal")
            return response

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            hook("before_intent")
            result = handler(request)
            hook("after_result")
            return result

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            hook("before_intent")
            result = await handler(request)
            hook("after_result")
            return result

    return create_agent(
        model,
        tools,
        middleware=[Boundaries(), ledger.middleware(journal_models=journal)],
        checkpointer=checkpointer,
    )


def build(
    kind: str, ledger: ToolLedger, effects: Effects, checkpointer: Any, hook: Hook = _noop
) -> Any:
    """The compiled ``kind`` agent ("create_agent" or "toolnode") over ``checkpointer``;
    with the suffix "-unjournaled" its model calls are not journaled (a control)."""
    model = RandomModel(hook=hook)
    tools = make_tools(effects, hook)
    kind, _, control = kind.partition("-")
    journal = control != "unjournaled"
    if kind == "create_agent":
        return create_agent_graph(ledger, model, tools, checkpointer, hook, journal)
    return toolnode_graph(ledger, model, tools, hook, journal).compile(checkpointer=checkpointer)


def answer(value: dict[str, Any], effects: Effects) -> dict[str, Any]:
    """A human answering an escalation from the world's record of what happened."""
    call = value.get("call") or value  # a question about a call beside a recorded one
    effects.append(tool=call.get("name"), kind="asked", key=None, args={"type": value["type"]})
    key = value.get("idempotency_key") or value.get("call", {}).get("idempotency_key")
    recorded = value.get("recorded") or {}
    if recorded.get("name") == value.get("call", {}).get("name") and any(
        e["kind"] == "effect" and e["key"] == recorded.get("idempotency_key")
        for e in effects.lines()
    ):  # a call asked about beside a recorded one of the same tool that took effect
        key = recorded["idempotency_key"]
    if any(e["kind"] == "effect" and e["key"] == key for e in effects.lines()):
        return {"action": "skip", "result": output_of(call["name"], call["args"])}
    return {"action": "retry"}


def next_input(state: Any, effects: Effects, start: Any) -> Any:
    """What to run next on the thread, or "done" once its run completed."""
    if not state.values:
        return start
    if state.interrupts:
        return Command(resume={i.id: answer(i.value, effects) for i in state.interrupts})
    if state.next or state.tasks:  # a crash between a step's writes and its checkpoint
        return None
    return "done"
