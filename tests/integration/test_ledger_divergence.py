"""A replayed call that differs from the recorded one asks a human, and never wedges.

The model here is a real LangChain chat model that answers differently on every call
(fresh tool-call ids, new arguments), as real models do when a step runs again. The
model's step is lost (its checkpoint damaged, so the saver falls back past it) after the
tool's result was recorded, so the resumed graph asks for a different call at the
place the ledger recorded the first one.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Annotated, Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncRedisSaver,
    RedisSaver,
    ToolCallDivergedError,
    ToolLedger,
    idempotency_key,
)
from tests.helpers.ledger_crashes import CONFIG, Crash, crash_after_result, lose_the_model_step
from tests.integration.test_ledger import chain_graph


class FickleModel(BaseChatModel):
    """Asks for ``pay`` with a new amount and a fresh tool-call id on every call."""

    asked: list[int] = Field(default_factory=list)  # the amounts it asked for
    ids: Any = None  # an iterator of fresh call ids

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **_: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="done")
        else:
            self.asked.append(len(self.asked) + 1)
            call_id = f"call_{next(self.ids)}"
            call = {"name": "pay", "args": {"amount": self.asked[-1]}, "id": call_id}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "fickle"


class State(TypedDict):
    messages: Annotated[list[Any], lambda a, b: a + b]


def paying_graph(node: ToolNode, model: FickleModel) -> StateGraph:
    builder = StateGraph(State)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    builder.add_edge("tools", "model")
    return builder


def pay_tool(paid: list[tuple[int, str | None]], crash_in: frozenset[int] = frozenset()) -> Any:
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        if amount in crash_in:  # dies between its intent and its effect
            raise Crash(f"paying {amount}")
        paid.append((amount, idempotency_key()))
        return f"paid {amount}"

    return pay


def diverge(
    saver: RedisSaver, redis_client: Any, ledger: ToolLedger, *, crashes: int = 1
) -> tuple[Any, list[tuple[int, str | None]], FickleModel]:
    """Run until the first payment is recorded and the process dies, lose the model's
    step, and resume: the model now asks to pay 2, where the ledger recorded paying 1."""
    paid: list[tuple[int, str | None]] = []
    model = FickleModel(ids=itertools.count())
    node = ToolNode([pay_tool(paid)], wrap_tool_call=crash_after_result(ledger, times=crashes))
    graph = paying_graph(node, model).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="pay")]}, CONFIG)
    lose_the_model_step(saver, redis_client)
    return graph, paid, model


def tool_messages(out: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m.tool_call_id, m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


def test_divergence_escalates_by_default_with_both_calls_and_the_recorded_outcome(
    saver: RedisSaver, redis_client: Any
) -> None:
    ledger = ToolLedger(saver)
    graph, paid, _ = diverge(saver, redis_client, ledger)
    out = graph.invoke(None, CONFIG)
    (pending,) = out["__interrupt__"]
    value = pending.value
    assert value["type"] == "tool_call_diverged"
    assert (value["thread_id"], value["position"]) == ("t", 0)
    recorded, call = value["recorded"], value["call"]
    assert (recorded["name"], recorded["args"], recorded["tool_call_id"]) == (
        "pay",
        {"amount": 1},
        "call_0",
    )
    assert (recorded["outcome"], recorded["result"]) == ("result", "paid 1")
    assert recorded["idempotency_key"] == paid[0][1]
    assert (call["name"], call["args"], call["tool_call_id"]) == ("pay", {"amount": 2}, "call_1")
    assert call["idempotency_key"] != recorded["idempotency_key"]
    assert value["answers"] == ["skip", "retry", "fail"]
    assert [p[0] for p in paid] == [1]  # nothing ran while asking
    (diverged,) = [e for e in ledger.entries("t") if e.state == "diverged"]
    assert diverged.args == {"amount": 2} and diverged.escalations == (0,)


@pytest.mark.parametrize("given", [False, True])
def test_skip_keeps_the_recorded_effect_and_a_second_resume_asks_nothing(
    saver: RedisSaver, redis_client: Any, given: bool
) -> None:
    ledger = ToolLedger(saver)
    # dies once after the first payment, and again once the answer was applied
    graph, paid, model = diverge(saver, redis_client, ledger, crashes=2)
    graph.invoke(None, CONFIG)
    answer: dict[str, Any] = {"action": "skip"}
    if given:
        answer["result"] = "paid 1 (checked by hand)"
    with pytest.raises(Crash):  # the answer's result is recorded; LangGraph's write is not
        graph.invoke(Command(resume=answer), CONFIG)
    out = graph.invoke(None, CONFIG)
    assert "__interrupt__" not in out
    content = "paid 1 (checked by hand)" if given else "paid 1"
    assert tool_messages(out) == [("call_1", content)]  # answers the new call's id
    assert out["messages"][-1].content == "done"
    assert [p[0] for p in paid] == [1]
    assert model.asked == [1, 2]
    (new,) = [e for e in ledger.entries("t") if e.args == {"amount": 2}]
    assert (new.state, new.resolution, new.diverged_from is not None) == ("result", "skip", True)


def test_retry_runs_the_new_call_once_under_its_own_key(
    saver: RedisSaver, redis_client: Any
) -> None:
    ledger = ToolLedger(saver)
    graph, paid, _ = diverge(saver, redis_client, ledger, crashes=2)
    graph.invoke(None, CONFIG)
    with pytest.raises(Crash):  # the new call's result is recorded, then the process dies
        graph.invoke(Command(resume={"action": "retry"}), CONFIG)
    out = graph.invoke(None, CONFIG)
    assert "__interrupt__" not in out
    assert tool_messages(out) == [("call_1", "paid 2")]
    assert [p[0] for p in paid] == [1, 2]  # the new call ran exactly once
    assert paid[0][1] != paid[1][1]
    (new,) = [e for e in ledger.entries("t") if e.args == {"amount": 2}]
    assert (new.state, new.resolution, new.attempts) == ("result", "retry", 1)


def test_fail_raises_tool_call_diverged(saver: RedisSaver, redis_client: Any) -> None:
    ledger = ToolLedger(saver)
    graph, paid, _ = diverge(saver, redis_client, ledger)
    graph.invoke(None, CONFIG)
    with pytest.raises(ToolCallDivergedError, match="a human chose to fail it") as info:
        graph.invoke(Command(resume={"action": "fail"}), CONFIG)
    assert (info.value.recorded_args, info.value.requested_args) == ({"amount": 1}, {"amount": 2})
    assert [p[0] for p in paid] == [1]


def test_raise_keeps_the_error_and_new_call_runs_it(saver: RedisSaver, redis_client: Any) -> None:
    ledger = ToolLedger(saver, on_divergence="raise")
    graph, paid, model = diverge(saver, redis_client, ledger)
    with pytest.raises(ToolCallDivergedError, match="on_divergence='escalate'"):
        graph.invoke(None, CONFIG)
    assert ledger.entries("t")[-1].state == "result"  # nothing was stored for the new call
    redeployed = ToolLedger(saver, on_divergence="new_call")  # settings are fixed per ledger
    node = ToolNode([pay_tool(paid)], wrap_tool_call=redeployed.wrap_tool_call)
    graph = paying_graph(node, model).compile(checkpointer=saver)
    out = graph.invoke(None, CONFIG)  # the model's step was saved with the error
    assert tool_messages(out) == [("call_1", "paid 2")]
    assert [p[0] for p in paid] == [1, 2] and paid[0][1] != paid[1][1]


def test_a_recorded_call_of_unknown_outcome_is_one_question_and_skip_needs_a_result(
    saver: RedisSaver, redis_client: Any
) -> None:
    """The recorded call died mid-way, then the model asked for another: the human is
    asked once (the divergence), and "skip" has no recorded result to stand on."""
    paid: list[tuple[int, str | None]] = []
    model = FickleModel(ids=itertools.count())
    ledger = ToolLedger(saver)
    node = ToolNode([pay_tool(paid, crash_in=frozenset({1}))], wrap_tool_call=ledger.wrap_tool_call)
    graph = paying_graph(node, model).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="pay")]}, CONFIG)
    lose_the_model_step(saver, redis_client)
    out = graph.invoke(None, CONFIG)
    (pending,) = out["__interrupt__"]
    assert pending.value["type"] == "tool_call_diverged"
    assert pending.value["recorded"]["outcome"] == "unknown"
    assert "between its intent and its result" in pending.value["recorded"]["reason"]
    with pytest.raises(ValidationError):
        graph.invoke(Command(resume={"action": "skip"}), CONFIG)
    out = graph.invoke(Command(resume={"action": "retry"}), CONFIG)
    assert tool_messages(out) == [("call_1", "paid 2")]
    assert [p[0] for p in paid] == [2]


async def test_async_divergence_escalates_and_applies_the_answer(
    redis_url: str, key_prefix: str, redis_client: Any
) -> None:
    paid: list[tuple[int, str | None]] = []
    model = FickleModel(ids=itertools.count())
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ledger = ToolLedger(saver)
        crashed: list[bool] = []

        async def awrap(request: Any, execute: Any) -> Any:
            result = await ledger.awrap_tool_call(request, execute)
            if not crashed:
                crashed.append(True)
                raise Crash("after the result")
            return result

        node = ToolNode([pay_tool(paid)], awrap_tool_call=awrap)
        graph = paying_graph(node, model).compile(checkpointer=saver)
        with pytest.raises(Crash):
            await graph.ainvoke({"messages": [HumanMessage(content="pay")]}, CONFIG)
        # the saver's sync methods run from another thread
        await asyncio.to_thread(lose_the_model_step, saver, redis_client)
        out = await graph.ainvoke(None, CONFIG)
        value = out["__interrupt__"][0].value
        assert (value["type"], value["call"]["args"]) == ("tool_call_diverged", {"amount": 2})
        out = await graph.ainvoke(Command(resume={"action": "retry"}), CONFIG)
        assert tool_messages(out) == [("call_1", "paid 2")]
        assert [p[0] for p in paid] == [1, 2]


# -- calls inside ordinary nodes ---------------------------------------------------------


class NoteState(TypedDict):
    notes: Annotated[list[str], lambda a, b: a + b]


def test_a_durable_call_that_diverges_is_asked_about_in_its_node(saver: RedisSaver) -> None:
    """A node asks the model, then makes a durable call with its answer; it dies after the
    call's result was recorded, so on resume the node asks the model again. The node runs
    again once answered too (as every node does after an interrupt), so the answer
    applies to the call it makes then: "skip" keeps the recorded effect whatever that is."""
    sent: list[str] = []
    drafts = iter(["first draft", "second draft", "third draft"])
    crash = [True]
    ledger = ToolLedger(saver)

    @ledger.durable
    def send(text: str) -> str:
        sent.append(text)
        return f"sent {text!r}"

    def work(state: NoteState) -> dict[str, Any]:
        receipt = send(next(drafts))  # the model's draft differs on every run
        if crash:
            crash.pop()
            raise Crash("after the durable call")
        return {"notes": [receipt]}

    graph = chain_graph(NoteState, work).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"notes": []}, CONFIG)
    out = graph.invoke(None, CONFIG)
    value = out["__interrupt__"][0].value
    assert value["type"] == "tool_call_diverged"
    assert value["recorded"]["args"] == {"args": ["first draft"], "kwargs": {}}
    assert value["recorded"]["result"] == "sent 'first draft'"
    assert value["call"]["args"] == {"args": ["second draft"], "kwargs": {}}
    out = graph.invoke(Command(resume={"action": "skip"}), CONFIG)
    assert out["notes"] == ["sent 'first draft'"]  # the recorded effect stands
    assert sent == ["first draft"]
    assert graph.invoke(None, CONFIG)["notes"] == ["sent 'first draft'"]  # finished
