"""A worker for the execution crash tests: an agent whose first round calls ``FIRST`` (a
read-only ``lookup``, or ``charge``), its second ``send_email``, each with arguments
worded anew on every model call; it runs the thread until it finishes, or SIGKILLs
itself the NTH time it reaches POINT.

    python -m tests.workers.branch_worker URL PREFIX EFFECTS DURABILITY \
        toolnode|create_agent|prompt FIRST POLICIES_JSON [POINT NTH]
    python -m tests.workers.branch_worker turns URL PREFIX EFFECTS DURABILITY

``prompt`` journals a prompt chain (``ledger.model(prompt | model)``) called with the
prompt's variables. With ``RUN_ID`` set, every run carries it as LangGraph Server's run id,
except the runs answering an interrupt, which get fresh ids (the server answers with a
new run). Points: model_start, model_answered, after_journal, lookup, email_start,
email_after_effect, charge_after_effect. Escalations are answered from the effect file.
``turns`` runs two turns ("a", then "b") of a ``TurnModel`` agent on thread "t" and exits.
With ``HOLD_PUTS`` set, every checkpoint put of the worker waits (up to a minute, far
longer than it lives): under durability "async" its checkpoints queue up, as behind a
slow Redis, and its SIGKILL loses them all.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import uuid
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from langgraph_durable import RedisSaver, ToolLedger, idempotency_key
from tests.helpers.journal_agent import AgentState
from tests.helpers.ledger_agent import Effects

KILL: dict[str, Any] = {"point": None, "nth": 0, "seen": {}}
START_INPUT = {"messages": [HumanMessage(content="do it")]}


def hook(point: str) -> None:
    KILL["seen"][point] = KILL["seen"].get(point, 0) + 1
    if point == KILL["point"] and KILL["seen"][point] == KILL["nth"]:
        os.kill(os.getpid(), signal.SIGKILL)


class ScriptModel(BaseChatModel):
    """Round 0 calls ``first``, round 1 ``send_email``, then it is done; arguments and
    tool-call ids are new on every call (a real model asked again)."""

    first: str = "lookup"

    @property
    def _llm_type(self) -> str:
        return "branch-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        hook("model_start")
        fresh = uuid.uuid4().hex[:6]
        rounds = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in messages)
        name = {0: self.first, 1: "send_email"}.get(rounds)
        args = {"q": f"q-{fresh}"} if rounds == 0 else {"body": f"hi {fresh}"}
        calls = [{"name": name, "args": args, "id": f"c_{uuid.uuid4().hex[:8]}"}] if name else []
        message = AIMessage(content=f"r{rounds} {fresh}", tool_calls=calls)
        hook("model_answered")
        return ChatResult(generations=[ChatGeneration(message=message)])


class TurnModel(BaseChatModel):
    """Charges once for each question (arguments worded anew), then says it is done."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "turn-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.calls += 1
        if isinstance(messages[-1], HumanMessage):
            args = {"q": f"for {messages[-1].content} {uuid.uuid4().hex[:4]}"}
            call = {"name": "charge", "args": args, "id": f"c{uuid.uuid4().hex[:6]}"}
            message = AIMessage(content="charging", tool_calls=[call])
        else:
            message = AIMessage(content=f"done {self.calls}")
        return ChatResult(generations=[ChatGeneration(message=message)])


def two_turns(url: str, prefix: str, effects_path: str, durability: str) -> None:
    from tests.helpers.journal_agent import toolnode_graph

    effects = Effects(effects_path)
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = toolnode_graph(ToolLedger(saver), TurnModel(), make_tools(effects)).compile(
            checkpointer=saver
        )
        config = {"configurable": {"thread_id": "t"}}
        for question in ("a", "b"):
            graph.invoke({"messages": [HumanMessage(question)]}, config, durability=durability)


def make_tools(effects: Effects) -> list[StructuredTool]:
    def lookup(q: str) -> str:
        """Look something up (read only)."""
        hook("lookup")
        return f"found {q}"

    def charge(q: str) -> str:
        """Charge the card."""
        effects.append(tool="charge", kind="effect", key=idempotency_key(), args={"q": q})
        hook("charge_after_effect")
        return f"charged {q}"

    def send_email(body: str) -> str:
        """Send an e-mail."""
        hook("email_start")
        effects.append(tool="send_email", kind="effect", key=idempotency_key(), args={"body": body})
        hook("email_after_effect")
        return f"sent {body}"

    return [StructuredTool.from_function(f) for f in (lookup, charge, send_email)]


def build(kind: str, ledger: ToolLedger, tools: list[Any], saver: Any, first: str) -> Any:
    model = ScriptModel(first=first)
    if kind == "create_agent":
        from langchain.agents import create_agent

        return create_agent(model, tools, middleware=[ledger.middleware()], checkpointer=saver)
    if kind == "prompt":
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

        prompt = ChatPromptTemplate.from_messages(
            [("system", "be brief"), MessagesPlaceholder("messages")]
        )
        chain = ledger.model(prompt | model)

        def agent(state: AgentState) -> dict[str, Any]:
            answer = chain.invoke({"messages": state["messages"]})
            hook("after_journal")
            return {"messages": [answer]}
    else:
        journaled = ledger.model(model).bind_tools(tools)

        def agent(state: AgentState) -> dict[str, Any]:
            answer = journaled.invoke(state["messages"])
            hook("after_journal")
            return {"messages": [answer]}

    def route(state: AgentState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ledger.tool_node(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def answer(value: dict[str, Any], effects: Effects) -> dict[str, Any]:
    """A human answering from the world's record of what happened."""
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
        return {"action": "skip", "result": "done already"}
    return {"action": "retry"}


def next_input(state: Any, effects: Effects) -> Any:
    if not state.values:
        return START_INPUT
    if state.interrupts:
        return Command(resume={i.id: answer(i.value, effects) for i in state.interrupts})
    if state.next or state.tasks:
        return None
    return "done"


def hold_puts() -> None:
    put, never = RedisSaver.put, threading.Event()

    def held(self: RedisSaver, *args: Any, **kwargs: Any) -> Any:
        never.wait(60)  # the worker is killed long before
        return put(self, *args, **kwargs)

    RedisSaver.put = held  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    if os.environ.get("LGD_DEBUG_LOG"):  # the ledger's decisions, for a failing test's reader
        import logging

        logging.basicConfig(filename=os.environ["LGD_DEBUG_LOG"], level=logging.DEBUG)
    if os.environ.get("HOLD_PUTS"):
        hold_puts()
    if argv[0] == "turns":
        two_turns(*argv[1:5])
        return
    url, prefix, effects_path, durability, kind, first, policies = argv[:7]
    if len(argv) >= 9:
        KILL["point"], KILL["nth"] = argv[7], int(argv[8])
    effects = Effects(effects_path)
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        ledger = ToolLedger(saver, policies=json.loads(policies))
        graph = build(kind, ledger, make_tools(effects), saver, first)
        config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
        for _ in range(20):
            payload = next_input(graph.get_state(config), effects)
            if payload == "done":
                print("done", flush=True)
                return
            run = config
            if os.environ.get("RUN_ID"):
                fresh = isinstance(payload, Command)  # the server answers in a new run
                run_id = f"answer-{uuid.uuid4().hex[:6]}" if fresh else os.environ["RUN_ID"]
                run = {**config, "metadata": {"run_id": run_id}}
                run["configurable"] = {**config["configurable"], "run_id": run_id}
            graph.invoke(payload, run, durability=durability)
        print("stuck", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
