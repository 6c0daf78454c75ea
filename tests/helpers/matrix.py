"""The scenario matrix's pieces (tests/crash/test_scenario_matrix.py): a model, three
side-effecting tools, three agent shapes, a human, and the oracle of one cell.

The model asks, in one AI message, for three parallel calls tagged with the newest human
message (the branch: "T1", an interrupt's answer "A"...): ``charge`` (policy retry, an
API that deduplicates by idempotency key), ``send_email`` and ``create_ticket`` (both
escalate), then says it is done. "random" models word each call anew (a ``note``) with
fresh tool-call ids on every call, like a real LLM; "deterministic" ones answer the same
every time. Every effect is a line in an fsync'd file: tool, tag, idempotency key.
A tool's result names its tag and key, so the final conversation shows whose result
each call got.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Callable
from operator import add
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import ToolLedger, idempotency_key
from tests.helpers.journal_agent import AgentState

TOOLS = ("charge", "send_email", "create_ticket")
POLICIES = {"charge": "retry", "send_email": "escalate", "create_ticket": "escalate"}
GATE = "which branch?"  # the interrupt a gated agent asks before its first model call


class EffectLog:
    """The outside world: one fsync'd JSON line per effect or question."""

    def __init__(self, path: str) -> None:
        self.path = path

    def append(self, **line: Any) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def lines(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(x) for x in f if x.strip()]


class MatrixModel(BaseChatModel):
    """Three tagged calls, then "done"; ``random``: new wording and ids every call."""

    random: bool = True

    @property
    def _llm_type(self) -> str:
        return "matrix"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        tag = next(m.content for m in reversed(messages) if isinstance(m, HumanMessage))
        if isinstance(messages[-1], ToolMessage):
            return _answer(AIMessage(content=f"done {tag}"))
        note = uuid.uuid4().hex[:6] if self.random else "n"
        calls = [
            {
                "name": name,
                "args": {"tag": tag, "note": note},
                "id": f"c{uuid.uuid4().hex[:8]}" if self.random else f"call_{i}",
            }
            for i, name in enumerate(TOOLS)
        ]
        return _answer(AIMessage(content=f"on it {note}", tool_calls=calls))


def _answer(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])


def make_tools(log: EffectLog, hook: Callable[[str], None]) -> list[StructuredTool]:
    def effect(name: str, tag: str) -> str:
        key = idempotency_key()
        log.append(kind="effect", tool=name, tag=tag, key=key)
        hook("effect")
        return f"{name} {tag} {key}"

    def charge(tag: str, note: str) -> str:
        """Charge the card (the API deduplicates by idempotency key)."""
        return effect("charge", tag)

    def send_email(tag: str, note: str) -> str:
        """Send an e-mail."""
        return effect("send_email", tag)

    def create_ticket(tag: str, note: str) -> str:
        """Open a ticket."""
        hook("ticket_start")
        return effect("create_ticket", tag)

    return [StructuredTool.from_function(f) for f in (charge, send_email, create_ticket)]


def _route(state: AgentState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(
    ledger: ToolLedger,
    model: BaseChatModel,
    tools: list[Any],
    hook: Callable[[str], None],
    journal: bool,
    gated: bool,
    retry_policy: Any = None,
) -> StateGraph:
    """A hand-written agent; ``gated``: its node asks ``GATE`` before the first model call
    and sends the answer as the newest human message (in the same task)."""
    chat = (ledger.model(model) if journal else model).bind_tools(tools)

    def agent(state: AgentState) -> dict[str, Any]:
        messages = list(state["messages"])
        if gated and not any(isinstance(m, ToolMessage) for m in messages):
            messages.append(HumanMessage(interrupt(GATE)))
        answer = chat.invoke(messages)
        hook("after_model")
        return {"messages": [answer]}

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ledger.tool_node(tools), retry_policy=retry_policy)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def build(
    shape: str,
    ledger: ToolLedger,
    model: BaseChatModel,
    tools: list[Any],
    hook: Callable[[str], None],
    journal: bool,
    gated: bool,
    saver: Any,
    retry_policy: Any = None,
) -> Any:
    """``toolnode`` (StateGraph + ToolNode), ``create_agent`` (+ ``ledger.middleware()``),
    ``subgraph`` (the toolnode agent as a compiled subgraph node)."""
    if shape == "create_agent":
        return _create_agent(ledger, model, tools, hook, journal, gated, saver)
    inner = agent_graph(ledger, model, tools, hook, journal, gated, retry_policy)
    if shape == "toolnode":
        return inner.compile(checkpointer=saver)
    outer = StateGraph(AgentState)
    outer.add_node("research", inner.compile())
    outer.add_edge(START, "research")
    outer.add_edge("research", END)
    return outer.compile(checkpointer=saver)


def _create_agent(
    ledger: ToolLedger,
    model: BaseChatModel,
    tools: list[Any],
    hook: Callable[[str], None],
    journal: bool,
    gated: bool,
    saver: Any,
) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    class Gate(AgentMiddleware):
        """Outside the ledger's: asks ``GATE`` in the model's task, then the journal."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            messages = list(request.messages)
            if gated and not any(isinstance(m, ToolMessage) for m in messages):
                request = request.override(messages=[*messages, HumanMessage(interrupt(GATE))])
            response = handler(request)
            hook("after_model")
            return response

    middleware = [Gate(), ledger.middleware(journal_models=journal)]
    return create_agent(model, tools, middleware=middleware, checkpointer=saver)


class SendsState(TypedDict):
    sent: Annotated[list[str], add]


def sends_graph(ledger: ToolLedger, log: EffectLog, hook: Callable[[str], None], saver: Any) -> Any:
    """Two identical ``Send``s to a node whose ``@ledger.durable`` call has an effect: two
    effects, each once."""

    @ledger.durable(name="notify", policy="escalate")
    def notify(to: str) -> str:
        key = idempotency_key()
        log.append(kind="effect", tool="notify", tag=to, key=key)
        hook("effect")
        return f"notify {to} {key}"

    def fan_out(state: SendsState) -> list[Send]:
        return [Send("notify", {"sent": []}), Send("notify", {"sent": []})]

    builder = StateGraph(SendsState)
    builder.add_node("notify", lambda state: {"sent": [notify("ops")]})
    builder.add_conditional_edges(START, fan_out, ["notify"])
    builder.add_edge("notify", END)
    return builder.compile(checkpointer=saver)


def human(value: Any, log: EffectLog, gate_answer: str) -> Any:
    """A human: the gate gets the cell's answer; a question about a call is answered from
    the world's record. Skip (it happened) only for a call of the same tool and tag whose
    effect is in the record; else retry."""
    if value == GATE:
        return gate_answer
    log.append(kind="asked", type=value["type"])
    effects = {(x["tool"], x["tag"], x["key"]) for x in log.lines() if x["kind"] == "effect"}
    if value["type"] == "tool_outcome_unknown":
        tag = _tag(value.get("args"))
        if (value["name"], tag, value["idempotency_key"]) in effects:
            return {"action": "skip", "result": f"{value['name']} {tag} {value['idempotency_key']}"}
        return {"action": "retry"}
    recorded, call = value["recorded"], value["call"]
    tag, rtag = _tag(call.get("args")), _tag(recorded.get("args"))
    key = recorded.get("idempotency_key")
    same = recorded.get("name") == call["name"] and rtag == tag
    if same and recorded.get("outcome") == "result":
        return {"action": "skip"}
    if same and (call["name"], tag, key) in effects:
        return {"action": "skip", "result": f"{call['name']} {tag} {key}"}
    return {"action": "retry"}


def _tag(args: Any) -> Any:
    """The branch a call's arguments name: a tool's ``tag``, a durable call's argument."""
    if isinstance(args, dict) and "tag" in args:
        return args["tag"]
    if isinstance(args, dict) and args.get("args"):
        return args["args"][0]
    return None


def verdict(
    way: str,
    log: EffectLog,
    final: dict[str, Any],
    keys_before: set[str],
) -> tuple[str, list[str]]:
    """The cell's oracle: ("safe"|"unsafe", why) from the effect record and the final
    conversation (``final``: {"done", "results": [(call tag, result)], "error"})."""
    problems = []
    effects = [x for x in log.lines() if x["kind"] == "effect"]
    if not final.get("done"):
        problems.append(f"wedged: {final.get('error', 'did not finish')}")
    for (tool, key), n in Counter((x["tool"], x["key"]) for x in effects).items():
        if n > 1 and tool != "charge":  # a retry tool re-run under its key is apart
            problems.append(f"{tool} ran {n} times under one key")
    continuing = way in ("resume", "server_retry", "answered", "copy", "retry_policy", "resend")
    if continuing:
        for (tool, tag), n in Counter((x["tool"], x["tag"]) for x in effects).items():
            keys = {x["key"] for x in effects if (x["tool"], x["tag"]) == (tool, tag)}
            if len(keys) > 1:
                problems.append(f"{tool} {tag} repeated under {len(keys)} keys")
    if way == "reanswered" and any(x["tag"] == "A" for x in effects):
        problems.append("an effect of the branch the human steered away from")
    if way == "rollback":
        again = [x for x in effects[final.get("effects_before", 0) :] if x["key"] in keys_before]
        if again:
            problems.append(f"rolled-back effects executed: {again}")
    if way == "sends" and len({x["key"] for x in effects}) != 2:
        problems.append(f"identical sends: {len(effects)} effects, want 2")
    branch = {"fork": "T1", "rollback": "T1", "update_state": "T3", "new_input": "T2"}.get(way)
    for tag, result in final.get("results", []):
        tool, got_tag, key = (result.split(" ") + ["", ""])[:3]
        if got_tag != tag:
            problems.append(f"{tool} for {tag} got {got_tag}'s result")
        elif tag == branch and key in keys_before:
            problems.append(f"{tool} for the new branch got the old branch's result")
    return ("unsafe" if problems else "safe"), problems
