"""No silent wiring traps: each way of plugging the ledger in records, or refuses with advice.

Real compiled graphs on a real Redis: a ToolNode in sync and async runs, and
``@ledger.durable`` in the Functional API.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, ConfigurationError, RedisSaver, ToolLedger
from tests.helpers.ledger_crashes import CONFIG, Crash


class State(TypedDict):
    messages: Annotated[list[Any], lambda a, b: a + b]


def pay_graph(node: ToolNode, saver: Any) -> Any:
    def model(state: State) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="ok")]}
        call = {"name": "pay", "args": {"amount": 5}, "id": "call_0"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def pay_tool(paid: list[int]) -> Any:
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    return pay


START_INPUT = {"messages": [HumanMessage(content="pay")]}


def test_tool_node_records_in_sync_runs_where_an_async_only_wrapper_cannot(
    saver: RedisSaver,
) -> None:
    paid: list[int] = []
    ledger = ToolLedger(saver)
    # by hand with only awrap_tool_call: LangGraph's sync path never calls the ledger
    by_hand = ToolNode([pay_tool(paid)], awrap_tool_call=ledger.awrap_tool_call)
    pay_graph(by_hand, saver).invoke(START_INPUT, {"configurable": {"thread_id": "by-hand"}})
    assert paid == [5] and ledger.entries("by-hand") == []

    out = pay_graph(ledger.tool_node([pay_tool(paid)]), saver).invoke(START_INPUT, CONFIG)
    assert out["messages"][-1].content == "ok"
    ((name, state),) = [(e.name, e.state) for e in ledger.entries("t")]
    assert (name, state) == ("pay", "result")
    with pytest.raises(ConfigurationError, match="wires wrap_tool_call itself"):
        ledger.tool_node([pay_tool(paid)], wrap_tool_call=ledger.wrap_tool_call)


async def test_tool_node_records_in_async_runs(redis_url: str, key_prefix: str) -> None:
    paid: list[int] = []
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ledger = ToolLedger(saver)
        out = await pay_graph(ledger.tool_node([pay_tool(paid)]), saver).ainvoke(
            START_INPUT, CONFIG
        )
        assert out["messages"][-1].content == "ok"
        assert [e.state for e in await ledger.aentries("t")] == ["result"]


async def test_an_async_run_of_a_sync_only_tool_node_is_refused_naming_awrap(
    redis_url: str, key_prefix: str
) -> None:
    paid: list[int] = []
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ledger = ToolLedger(saver)
        node = ToolNode([pay_tool(paid)], wrap_tool_call=ledger.wrap_tool_call)
        with pytest.raises(ConfigurationError, match="awrap_tool_call=ledger.awrap_tool_call"):
            await pay_graph(node, saver).ainvoke(START_INPUT, CONFIG)
        assert paid == []  # refused before the tool ran
        assert await ledger.aentries("t") == []


async def test_a_sync_only_tool_node_on_the_sync_saver_records_in_async_runs(
    saver: RedisSaver,
) -> None:
    paid: list[int] = []
    ledger = ToolLedger(saver)
    node = ToolNode([pay_tool(paid)], wrap_tool_call=ledger.wrap_tool_call)
    out = await pay_graph(node, saver).ainvoke(START_INPUT, CONFIG)
    assert out["messages"][-1].content == "ok" and paid == [5]
    assert [e.state for e in ledger.entries("t")] == ["result"]


# -- the Functional API ------------------------------------------------------------------


def test_durable_over_a_task_is_refused_at_decoration(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)

    @task
    def send(to: str) -> str:
        return to

    with pytest.raises(ConfigurationError, match="Put @ledger.durable under @task"):
        ledger.durable(send)


def test_a_durable_function_returning_a_future_is_refused(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)

    @task
    def send(to: str) -> str:
        return f"sent {to}"

    @ledger.durable
    def send_later(to: str) -> Any:
        return send(to)  # a future: the ledger cannot record it

    @entrypoint(checkpointer=saver)
    def workflow(to: str) -> Any:
        return send_later(to)

    with pytest.raises(ConfigurationError, match="returned a Future, not a result"):
        workflow.invoke("ann", CONFIG)
    (entry,) = ledger.entries("t")
    assert entry.state == "error"  # recorded as failed: not an unknown outcome


def test_durable_under_a_task_records_and_escalates_inside_it(saver: RedisSaver) -> None:
    sent: list[str] = []
    crash = [True]
    ledger = ToolLedger(saver)

    @task
    @ledger.durable
    def send(to: str) -> str:
        sent.append(to)
        if crash:  # dies after the effect, before the ledger records the result
            crash.pop()
            raise Crash("after the effect")
        return f"sent {to}"

    @entrypoint(checkpointer=saver)
    def workflow(to: str) -> str:
        return send(to).result()

    with pytest.raises(Crash):
        workflow.invoke("ann", CONFIG)
    workflow.invoke(None, CONFIG)  # stops at the escalation, raised inside the task
    (pending,) = workflow.get_state(CONFIG).interrupts
    assert (pending.value["type"], pending.value["name"]) == ("tool_outcome_unknown", "send")
    assert workflow.invoke(Command(resume={"action": "skip", "result": "sent ann"}), CONFIG) == (
        "sent ann"
    )
    assert sent == ["ann"]
    (entry,) = ledger.entries("t")
    assert (entry.state, entry.resolution) == ("result", "skip")


# -- a ledger without a saver: the one its graph runs with ------------------------------


def test_a_ledger_without_a_saver_records_through_the_graphs_own(saver: RedisSaver) -> None:
    paid: list[int] = []
    ledger = ToolLedger()  # as in a served graph: the checkpointer is the server's
    out = pay_graph(ledger.tool_node([pay_tool(paid)]), saver).invoke(START_INPUT, CONFIG)
    assert out["messages"][-1].content == "ok" and paid == [5]
    assert [(e.name, e.state) for e in ToolLedger(saver).entries("t")] == [("pay", "result")]
    with pytest.raises(ConfigurationError, match=r"pass one: ToolLedger\(saver\)"):
        ledger.entries("t")  # outside a run there is no config to find a saver in


async def test_a_ledger_without_a_saver_escalates_on_the_async_saver(
    redis_url: str, key_prefix: str
) -> None:
    sent: list[str] = []
    crash = [True]
    ledger = ToolLedger()

    @ledger.durable
    def send(to: str) -> str:  # sync, in an async run: LangGraph runs it in a thread
        sent.append(to)
        if crash:
            crash.pop()
            raise Crash("after the effect")
        return f"sent {to}"

    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:

        @entrypoint(checkpointer=saver)
        def workflow(to: str) -> str:
            return send(to)

        with pytest.raises(Crash):
            await workflow.ainvoke("ann", CONFIG)
        await workflow.ainvoke(None, CONFIG)
        (pending,) = (await workflow.aget_state(CONFIG)).interrupts
        assert pending.value["type"] == "tool_outcome_unknown"
        answer = Command(resume={"action": "skip", "result": "sent ann"})
        assert await workflow.ainvoke(answer, CONFIG) == "sent ann"
        assert sent == ["ann"]
        (entry,) = await ToolLedger(saver).aentries("t")
        assert (entry.state, entry.resolution) == ("result", "skip")


@pytest.mark.parametrize("checkpointer", [None, InMemorySaver()], ids=["none", "in-memory"])
def test_a_ledger_without_a_saver_refuses_a_graph_on_another_checkpointer(
    checkpointer: Any,
) -> None:
    paid: list[int] = []
    graph = pay_graph(ToolLedger().tool_node([pay_tool(paid)]), checkpointer)
    named = "no checkpointer" if checkpointer is None else "InMemorySaver"
    with pytest.raises(ConfigurationError, match=f"runs with {named}: compile it with"):
        graph.invoke(START_INPUT, CONFIG)
    assert paid == []  # refused before the tool ran


def test_calls_outside_a_checkpointed_task_run_unrecorded(
    saver: RedisSaver, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside a graph task (a script, a ``RunnableLambda`` run with a config of its own),
    a ledger, with a saver or without one, runs the call as it is: a side effect with one
    warning per ledger, a model call without any (asking a model outside a graph is
    common: a prompt being tried). Nothing is recorded."""
    import logging

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.runnables import RunnableLambda

    sent: list[str] = []
    for ledger in (ToolLedger(saver), ToolLedger()):

        @ledger.durable
        def send(to: str) -> str:
            sent.append(to)
            return f"sent {to}"

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
            model = ledger.model(FakeListChatModel(responses=["hi"]))
            assert model.invoke("q", {"configurable": {"thread_id": "x"}}).content == "hi"
            assert "outside a checkpointed graph task" not in caplog.text
            wrapped = RunnableLambda(lambda to: send(to))
            assert wrapped.invoke("ann", {"configurable": {"thread_id": "x"}}) == "sent ann"
            assert send("bob") == "sent bob"
        assert sent[-2:] == ["ann", "bob"]
        assert caplog.text.count("outside a checkpointed graph task") == 1
    assert len(sent) == 4 and ToolLedger(saver).entries("x") == []
