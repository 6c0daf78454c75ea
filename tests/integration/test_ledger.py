"""The tool-result ledger in-process: policies, escalation, keys, divergence, lifecycle.

A crash is simulated here by ``Crash``, a BaseException that nothing catches, so the
call's result is never recorded. The real thing (SIGKILLed subprocesses at every
boundary) is in test_ledger_crash.py.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from pydantic import ValidationError
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncRedisSaver,
    ConfigurationError,
    RedisSaver,
    ToolCallDivergedError,
    ToolLedger,
    ToolOutcomeUnknownError,
    idempotency_key,
)
from tests.helpers.ledger_agent import (
    POLICIES,
    START_INPUT,
    Effects,
    agent_graph,
    answer,
    normalized,
)
from tests.helpers.ledger_crashes import CONFIG, Crash, crash_after_result, lose_the_model_step
from tests.helpers.redis_keys import flip_last_bit


def crash_once(*plan: tuple[str, str]) -> Callable[..., None]:
    """A tool hook under which each ``(point, tool)`` of ``plan`` dies the first time that
    tool reaches that point. The decision is per call: parallel calls share no count."""
    left = set(plan)
    lock = threading.Lock()

    def hook(point: str, tool: str = "") -> None:
        with lock:
            fire = (point, tool) in left
            left.discard((point, tool))
        if fire:
            raise Crash(f"{tool} at {point}")

    return hook


def crash_at(point: str, *tools: str) -> Callable[..., None]:
    """Each of ``tools`` dies once, the first time it reaches ``point``."""
    return crash_once(*((point, tool) for tool in tools))


CALLS_PER_STEP = 3  # the agent asks for charge, send_email and create_ticket together


def together(wrap: Callable[[Any, Any], Any], calls: int = CALLS_PER_STEP) -> Callable[..., Any]:
    """Hold each of a ToolNode step's parallel calls, once it returned or raised, until
    every call of the step has: so all of them ran before a crash is seen.

    Without it, what a crash leaves behind depends on thread timing: ToolNode's
    ``Executor.map`` cancels the calls not yet started when one raises."""
    barrier = threading.Barrier(calls, timeout=120)  # a safety net: never reached

    def held(request: Any, execute: Any) -> Any:
        try:
            result = wrap(request, execute)
        except BaseException:
            barrier.wait()
            raise
        barrier.wait()
        return result

    return held


def atogether(awrap: Callable[[Any, Any], Any], calls: int = CALLS_PER_STEP) -> Callable[..., Any]:
    """``together`` for async ToolNode, whose ``asyncio.gather`` would otherwise leave
    the other calls running on after the failed invoke, racing the next one."""
    gate: dict[str, Any] = {"arrived": 0, "open": None}

    async def settled() -> None:
        if gate["open"] is None:
            gate["open"] = asyncio.Event()
        opened = gate["open"]
        gate["arrived"] += 1
        if gate["arrived"] == calls:  # the last one lets the step's calls go
            gate["arrived"], gate["open"] = 0, None
            opened.set()
        else:
            await asyncio.wait_for(opened.wait(), timeout=120)  # a safety net

    async def held(request: Any, execute: Any) -> Any:
        try:
            result = await awrap(request, execute)
        except BaseException:
            await settled()
            raise
        await settled()
        return result

    return held


def crash_graph(
    ledger: ToolLedger,
    effects: Effects,
    *,
    hook: Callable[..., None] = lambda point, tool="": None,
    wrap: Callable[[Any, Any], Any] | None = None,
) -> StateGraph:
    """The ledger agent, its parallel tool calls settling ``together``."""
    return agent_graph(
        ledger,
        effects,
        hook=hook,
        wrap=together(wrap or ledger.wrap_tool_call),
        awrap=atogether(ledger.awrap_tool_call),
    )


def effect_lines(effects: Effects, tool: str) -> list[dict[str, Any]]:
    return [e for e in effects.lines() if e["tool"] == tool and e["kind"] == "effect"]


def resume_all(graph: Any, effects: Effects) -> dict[str, Any]:
    """Answer escalations from the effect file until the run completes."""
    out = graph.invoke(None, CONFIG)
    while out.get("__interrupt__"):
        state = graph.get_state(CONFIG)
        out = graph.invoke(
            Command(resume={i.id: answer(i.value, effects) for i in state.interrupts}), CONFIG
        )
    return out


def test_replay_returns_recorded_results_without_calling_tools(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    calls: list[str] = []
    crashed: list[bool] = []

    def wrap(request: Any, execute: Any) -> Any:
        result = ledger.wrap_tool_call(
            request, lambda r: (calls.append(r.tool_call["name"]), execute(r))[1]
        )
        if len(calls) == 3 and not crashed:  # round 0 recorded; LangGraph's writes are not
            crashed.append(True)
            raise Crash("after the results")
        return result

    ledger = ToolLedger(saver, policies=POLICIES)
    graph = crash_graph(ledger, effects, wrap=wrap).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    assert sorted(calls) == ["charge", "create_ticket", "send_email"]
    out = graph.invoke(None, CONFIG)
    assert normalized(out["messages"]) == reference
    assert len(calls) == 9  # 3 rounds x 3 tools: round 0 was replayed, not re-run
    for tool_name in ("charge", "send_email", "create_ticket"):
        assert len(effect_lines(effects, tool_name)) == 3


@pytest.mark.parametrize("action", ["skip", "retry"])
def test_unknown_outcome_escalates_and_the_answer_is_applied(
    saver: RedisSaver, effects: Effects, reference: list[Any], action: str
) -> None:
    point = "tool_after_effect" if action == "skip" else "tool_start"
    ledger = ToolLedger(saver, policies=POLICIES)
    graph = crash_graph(ledger, effects, hook=crash_at(point, "send_email")).compile(
        checkpointer=saver
    )
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    out = graph.invoke(None, CONFIG)
    (pending,) = out["__interrupt__"]
    value = pending.value
    assert value["type"] == "tool_outcome_unknown"
    assert (value["tool_call_id"], value["name"]) == ("call_1", "send_email")
    assert value["args"] == {"to": "user0@example.com"}
    assert value["idempotency_key"].startswith("lgd-")
    assert answer(value, effects)["action"] == action  # the effect file agrees
    out = graph.invoke(Command(resume=answer(value, effects)), CONFIG)
    assert normalized(out["messages"]) == reference
    sent = effect_lines(effects, "send_email")
    assert len(sent) == 3
    assert sent[0]["key"] == value["idempotency_key"]  # a retry reuses the key
    (entry,) = [e for e in ledger.entries("t") if e.idempotency_key == value["idempotency_key"]]
    assert (entry.state, entry.resolution) == ("result", action)


def test_several_unknown_calls_escalate_in_order_each_answer_to_its_call(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    ledger = ToolLedger(saver, policies=POLICIES)
    hook = crash_at("tool_after_effect", "send_email", "create_ticket")
    graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    asked = []
    out = graph.invoke(None, CONFIG)
    while out.get("__interrupt__"):
        asked += [i.value["name"] for i in out["__interrupt__"]]
        state = graph.get_state(CONFIG)
        out = graph.invoke(
            Command(resume={i.id: answer(i.value, effects) for i in state.interrupts}), CONFIG
        )
    assert asked == ["send_email", "create_ticket"]  # in the order of the AI message
    assert normalized(out["messages"]) == reference
    assert len(effect_lines(effects, "send_email")) == 3
    assert len(effect_lines(effects, "create_ticket")) == 3


def test_a_retry_that_is_lost_again_asks_again_instead_of_reusing_the_answer(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    """A human answered "retry"; the retried call took effect and the process died before
    its result. The old answer must not run it a third time: the call asks anew."""
    # Both die before their effect; send_email's retry dies after it.
    hook = crash_once(
        ("tool_start", "send_email"),
        ("tool_start", "create_ticket"),
        ("tool_after_effect", "send_email"),
    )
    ledger = ToolLedger(saver, policies=POLICIES)
    graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    asked = []
    for _ in range(10):
        state = graph.get_state(CONFIG)
        if not state.next and not state.tasks:
            break
        asked += [(i.value["name"], answer(i.value, effects)["action"]) for i in state.interrupts]
        resume = {i.id: answer(i.value, effects) for i in state.interrupts}
        try:
            graph.invoke(Command(resume=resume) if resume else None, CONFIG)
        except Crash:  # the retried send_email died after its effect
            pass
    assert normalized(graph.get_state(CONFIG).values["messages"]) == reference
    assert ("send_email", "skip") in asked  # asked again after the lost retry
    assert len(effect_lines(effects, "send_email")) == 3
    assert len(effect_lines(effects, "create_ticket")) == 3


def test_policy_fail_and_answer_fail_raise_tool_outcome_unknown(
    saver: RedisSaver, effects: Effects
) -> None:
    ledger = ToolLedger(saver, policies={**POLICIES, "create_ticket": "fail"})
    hook = crash_at("tool_start", "create_ticket")
    graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    with pytest.raises(ToolOutcomeUnknownError) as info:
        graph.invoke(None, CONFIG)
    assert (info.value.name, info.value.tool_call_id, info.value.thread_id) == (
        "create_ticket",
        "call_2",
        "t",
    )
    assert "between its intent and its result" in str(info.value)

    # Redeployed with another policy (a ledger's settings are fixed): now asked about
    ledger = ToolLedger(saver, policies={**POLICIES, "create_ticket": "escalate"})
    graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
    out = graph.invoke(None, CONFIG)
    assert out["__interrupt__"][0].value["name"] == "create_ticket"
    with pytest.raises(ToolOutcomeUnknownError, match="a human chose to fail it"):
        graph.invoke(Command(resume={"action": "fail"}), CONFIG)
    assert effect_lines(effects, "create_ticket") == []  # never ran: nothing happened


def test_an_invalid_answer_is_rejected_and_can_be_answered_again(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    ledger = ToolLedger(saver, policies=POLICIES)
    graph = crash_graph(ledger, effects, hook=crash_at("tool_start", "send_email")).compile(
        checkpointer=saver
    )
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    graph.invoke(None, CONFIG)
    for bad in ({"action": "skip"}, {"action": "maybe"}, "retry"):
        with pytest.raises(ValidationError):
            graph.invoke(Command(resume=bad), CONFIG)
    out = graph.invoke(Command(resume={"action": "retry"}), CONFIG)
    assert normalized(out["messages"]) == reference


def test_retry_policy_calls_again_with_the_same_idempotency_key(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    ledger = ToolLedger(saver, policies=POLICIES)
    hook = crash_at("tool_after_effect", "charge")
    graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    out = graph.invoke(None, CONFIG)  # no interrupt: charge retries by itself
    assert normalized(out["messages"]) == reference
    attempts = [e for e in effects.lines() if e["tool"] == "charge" and e["args"]["amount"] == 10]
    assert [e["kind"] for e in attempts] == ["attempt", "effect", "attempt"]
    assert len({e["key"] for e in attempts}) == 1
    entry = next(e for e in ledger.entries("t") if e.name == "charge" and e.attempts == 2)
    assert entry.state == "result"


def test_keys_tell_apart_calls_that_reuse_provider_ids_and_arguments(
    saver: RedisSaver, effects: Effects
) -> None:
    ledger = ToolLedger(saver, policies=POLICIES)
    graph = agent_graph(ledger, effects).compile(checkpointer=saver)
    graph.invoke(START_INPUT, CONFIG)
    entries = ledger.entries("t")
    assert len(entries) == 9
    assert {e.tool_call_id for e in entries} == {"call_0", "call_1", "call_2"}
    tickets = [e for e in entries if e.name == "create_ticket"]
    assert len({e.args_hash for e in tickets}) == 1  # same arguments every round...
    assert len({e.idempotency_key for e in entries}) == 9  # ...yet every call its own key
    assert {e["key"] for e in effects.lines()} == {e.idempotency_key for e in entries}


class PayState(TypedDict):
    amount: int
    messages: Annotated[list[Any], lambda a, b: a + b]


def pay_graph(
    ledger: ToolLedger,
    amount: Callable[[], int],
    paid: list[Any],
    wrap: Callable[[Any, Any], Any] | None = None,
) -> StateGraph:
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append((amount, idempotency_key()))
        return f"paid {amount}"

    def model(state: PayState) -> dict[str, Any]:
        if state["messages"] and isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="ok")]}
        call = {"name": "pay", "args": {"amount": amount()}, "id": "call_0"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    builder = StateGraph(PayState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([pay], wrap_tool_call=wrap or ledger.wrap_tool_call))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    builder.add_edge("tools", "model")
    return builder


@pytest.mark.parametrize("changed", [False, True])
def test_a_replayed_call_is_returned_and_a_changed_one_refused_on_raise(
    saver: RedisSaver, redis_client: Any, changed: bool
) -> None:
    amount = [10]
    paid: list[Any] = []
    ledger = ToolLedger(saver, on_divergence="raise")
    wrap = crash_after_result(ledger)
    graph = pay_graph(ledger, lambda: amount[0], paid, wrap).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"amount": 0, "messages": [HumanMessage(content="pay")]}, CONFIG)
    # The model's checkpoint is lost (as durability="async" can lose it), so the model
    # runs again and asks for its tool calls a second time at the same place.
    lose_the_model_step(saver, redis_client)
    if not changed:
        # The model is not journaled and its checkpoint is gone: the ledger cannot tell
        # this run from a new one sending the same request (decide.py row 12), so it
        # asks; on_divergence="raise" makes the question an error, nothing is paid.
        with pytest.raises(ToolCallDivergedError, match="cannot tell"):
            graph.invoke(None, CONFIG)
        assert [p[0] for p in paid] == [10]
        return
    amount[0] = 99
    with pytest.raises(ToolCallDivergedError) as info:
        graph.invoke(None, CONFIG)
    assert info.value.recorded_args == {"amount": 10} and info.value.requested_args == {
        "amount": 99
    }
    assert (info.value.recorded_name, info.value.thread_id) == ("pay", "t")
    assert [p[0] for p in paid] == [10]

    redeployed = ToolLedger(saver, on_divergence="new_call")  # settings are fixed per ledger
    graph = pay_graph(redeployed, lambda: amount[0], paid, redeployed.wrap_tool_call).compile(
        checkpointer=saver
    )
    graph.invoke(None, CONFIG)
    assert [p[0] for p in paid] == [10, 99]
    assert paid[0][1] != paid[1][1]  # a new call, a new idempotency key


@pytest.mark.parametrize("policy", ["retry", "fail"])
def test_a_call_the_ledger_cannot_place_follows_its_policy(
    saver: RedisSaver, redis_client: Any, policy: str
) -> None:
    """decide.py row 10 (the model's checkpoint lost, the model not journaled): a retry
    tool asked for the same call runs again under the recorded idempotency key (an API
    that deduplicates answers for the same call); a fail tool raises."""
    paid: list[Any] = []
    ledger = ToolLedger(saver, policies={"pay": policy})
    wrap = crash_after_result(ledger)
    graph = pay_graph(ledger, lambda: 10, paid, wrap).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"amount": 0, "messages": [HumanMessage(content="pay")]}, CONFIG)
    lose_the_model_step(saver, redis_client)
    if policy == "fail":
        with pytest.raises(ToolOutcomeUnknownError, match="cannot tell"):
            graph.invoke(None, CONFIG)
        assert len(paid) == 1
        return
    out = graph.invoke(None, CONFIG)
    assert "__interrupt__" not in out and [m.content for m in out["messages"]][-1] == "ok"
    assert [p[0] for p in paid] == [10, 10] and paid[0][1] == paid[1][1]


def test_a_time_travel_fork_runs_its_calls_as_new_calls(saver: RedisSaver) -> None:
    paid: list[Any] = []
    ledger = ToolLedger(saver)
    graph = pay_graph(ledger, lambda: 10, paid).compile(checkpointer=saver)
    graph.invoke({"amount": 0, "messages": [HumanMessage(content="pay")]}, CONFIG)
    before_model = next(
        s
        for s in graph.get_state_history(CONFIG)
        if s.next == ("model",) and s.metadata["step"] == 0
    )
    graph.invoke(None, before_model.config)  # LangGraph re-executes a fork's nodes
    assert [p[0] for p in paid] == [10, 10]
    assert paid[0][1] != paid[1][1]


def test_readonly_tools_are_not_recorded(saver: RedisSaver, effects: Effects) -> None:
    ledger = ToolLedger(saver, policies={"send_email": "readonly", "charge": "retry"})
    agent_graph(ledger, effects).compile(checkpointer=saver).invoke(START_INPUT, CONFIG)
    assert {e.name for e in ledger.entries("t")} == {"charge", "create_ticket"}


def test_bad_options_are_named() -> None:
    with pytest.raises(ConfigurationError, match="'sometimes' for 'x'"):
        ToolLedger(RedisSaver.__new__(RedisSaver), policies={"x": "sometimes"})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="RedisSaver or AsyncRedisSaver"):
        ToolLedger(object())


# -- tools that return Command, async tools and the async saver --------------------------


class CommandState(TypedDict):
    messages: Annotated[list[Any], lambda a, b: a + b]
    orders: Annotated[list[str], lambda a, b: a + b]


def test_a_tool_returning_command_is_replayed_as_the_same_command(saver: RedisSaver) -> None:
    placed: list[str] = []

    @tool
    def place_order(item: str, tool_call_id: Annotated[str, "InjectedToolCallId"] = "") -> Command:
        """Place an order."""
        placed.append(item)
        return Command(
            update={
                "orders": [item],
                "messages": [ToolMessage(content=f"ordered {item}", tool_call_id="call_0")],
            }
        )

    def model(state: CommandState) -> dict[str, Any]:
        if state["orders"]:
            return {"messages": [AIMessage(content="done")]}
        call = {"name": "place_order", "args": {"item": "book"}, "id": "call_0"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    ledger = ToolLedger(saver)
    builder = StateGraph(CommandState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([place_order], wrap_tool_call=crash_after_result(ledger)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="buy")], "orders": []}, CONFIG)
    out = graph.invoke(None, CONFIG)
    assert placed == ["book"]
    assert out["orders"] == ["book"]
    assert [m.content for m in out["messages"]][-2:] == ["ordered book", "done"]
    (entry,) = ledger.entries("t")
    assert isinstance(entry.result, Command)


async def test_async_saver_and_async_tools_escalate_and_replay(
    redis_url: str, key_prefix: str, effects: Effects, reference: list[Any]
) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ledger = ToolLedger(saver, policies=POLICIES)
        hook = crash_at("tool_after_effect", "send_email", "create_ticket")
        graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
        with pytest.raises(Crash):
            await graph.ainvoke(START_INPUT, CONFIG)
        out = await graph.ainvoke(None, CONFIG)
        asked = []
        while out.get("__interrupt__"):
            asked += [i.value["name"] for i in out["__interrupt__"]]
            state = await graph.aget_state(CONFIG)
            resume = {i.id: answer(i.value, effects) for i in state.interrupts}
            out = await graph.ainvoke(Command(resume=resume), CONFIG)
        assert asked == ["send_email", "create_ticket"]
        assert normalized(out["messages"]) == reference
        assert len(effect_lines(effects, "send_email")) == 3
        assert len(await ledger.aentries("t")) == 9


# -- durable calls inside ordinary nodes -------------------------------------------------


class NodeState(TypedDict):
    log: Annotated[list[str], lambda a, b: a + b]


def node_graph(ledger: ToolLedger, world: list[str], crash: Callable[[str], None]) -> Any:
    @ledger.durable
    def send(to: str) -> str:
        world.append(f"send {to} {idempotency_key()}")
        crash(to)
        return f"sent {to}"

    @ledger.durable(name="refund", policy="retry")
    async def refund(amount: int) -> str:
        world.append(f"refund {amount} {idempotency_key()}")
        return f"refunded {amount}"

    async def work(state: NodeState) -> dict[str, Any]:
        first = await asyncio.to_thread(send, "a")
        approved = interrupt("approve b?")  # the node's own interrupt, between two calls
        second = await asyncio.to_thread(send, "b") if approved else "skipped"
        third = await refund(5)
        return {"log": [first, second, third]}

    return chain_graph(NodeState, work)


def chain_graph(state: type, fn: Any) -> StateGraph:
    builder = StateGraph(state)
    builder.add_node("work", fn)
    builder.add_edge(START, "work")
    builder.add_edge("work", END)
    return builder


async def test_durable_calls_in_a_node_keep_their_order_among_its_interrupts(
    redis_url: str, key_prefix: str
) -> None:
    world: list[str] = []
    crashes = {"b"}

    def crash(to: str) -> None:
        if to in crashes:
            crashes.discard(to)
            raise Crash(to)

    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ledger = ToolLedger(saver)
        graph = node_graph(ledger, world, crash).compile(checkpointer=saver)
        out = await graph.ainvoke({"log": []}, CONFIG)
        assert out["__interrupt__"][0].value == "approve b?"
        with pytest.raises(Crash):  # send("b") took effect, its result was not recorded
            await graph.ainvoke(Command(resume=True), CONFIG)
        out = await graph.ainvoke(None, CONFIG)
        value = out["__interrupt__"][0].value
        assert (value["type"], value["name"]) == ("tool_outcome_unknown", "send")
        assert value["args"] == {"args": ["b"], "kwargs": {}}
        out = await graph.ainvoke(Command(resume={"action": "skip", "result": "sent b"}), CONFIG)
        assert out["log"] == ["sent a", "sent b", "refunded 5"]
        assert [w.split()[:2] for w in world] == [["send", "a"], ["send", "b"], ["refund", "5"]]
        keys = [w.split()[2] for w in world]
        assert len(set(keys)) == 3 and all(k.startswith("lgd-") for k in keys)


def test_a_durable_function_outside_a_graph_just_runs(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)

    @ledger.durable
    def double(x: int) -> int:
        assert idempotency_key() is None
        return 2 * x

    assert double(4) == 8


# -- lifecycle ---------------------------------------------------------------------------


def test_ledger_entries_follow_delete_copy_ttl_and_retention(
    redis_url: str, key_prefix: str, effects: Effects, redis_client: Any, reference: list[Any]
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=600) as saver:
        ledger = ToolLedger(saver, policies=POLICIES)
        wrap = crash_after_result(ledger, "create_ticket")
        graph = crash_graph(ledger, effects, wrap=wrap).compile(checkpointer=saver)
        with pytest.raises(Crash):
            graph.invoke(START_INPUT, CONFIG)
        tk = saver.keys.thread("t")
        assert 0 < redis_client.ttl(tk.lg) <= 600 and 0 < redis_client.ttl(tk.lgx) <= 600

        saver.copy_thread("t", "copy")
        assert [(e.field, e.state, e.idempotency_key) for e in ledger.entries("copy")] == [
            (e.field, e.state, e.idempotency_key) for e in ledger.entries("t")
        ]
        # the copy resumes from the crash without repeating what the original did
        done = len(effects.lines())
        out = graph.invoke(None, {"configurable": {"thread_id": "copy"}})
        assert normalized(out["messages"]) == reference
        assert len(effects.lines()) == done + 8  # rounds 1 and 2 only (charge logs twice)
        assert 0 < redis_client.ttl(saver.keys.thread("copy").lg) <= 600

        saver.prune(["copy"], strategy="keep_latest")
        assert ledger.entries("copy") == []  # no kept checkpoint can replay those steps
        assert len(ledger.entries("t")) == 3
        saver.delete_thread("t")
        assert not redis_client.exists(tk.lg) and not redis_client.exists(tk.lgx)
        assert ledger.entries("t") == []


def test_a_damaged_entry_is_an_unknown_outcome_and_kept_in_quarantine(
    saver: RedisSaver, effects: Effects, reference: list[Any], redis_client: Any
) -> None:
    ledger = ToolLedger(saver, policies=POLICIES)
    wrap = crash_after_result(ledger, "send_email")
    graph = crash_graph(ledger, effects, wrap=wrap).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    tk = saver.keys.thread("t")
    (field,) = [e.field for e in ledger.entries("t") if e.name == "send_email"]
    flip_last_bit(redis_client, tk.lg, field)
    (damaged,) = [e for e in ledger.entries("t") if e.name == "send_email"]
    assert (damaged.state, damaged.damage) == ("damaged", "checksum mismatch")

    graph = crash_graph(ledger, effects).compile(checkpointer=saver)
    out = graph.invoke(None, CONFIG)
    value = out["__interrupt__"][0].value
    assert value["name"] == "send_email" and "damaged (checksum mismatch)" in value["reason"]
    assert redis_client.hexists(tk.qt, saver.keys.quarantine_field("lg", field))
    out = graph.invoke(Command(resume=answer(value, effects)), CONFIG)
    assert normalized(out["messages"]) == reference
    assert len(effect_lines(effects, "send_email")) == 3


# -- create_agent middleware ---------------------------------------------------------------


def test_create_agent_middleware_records_and_replays(saver: RedisSaver, tmp_path: Any) -> None:
    agents = pytest.importorskip("langchain.agents")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:
            return self

    sent: list[str] = []

    @tool
    def notify(who: str) -> str:
        """Notify someone."""
        sent.append(who)
        if who == "ann" and sent.count("ann") == 1:
            raise Crash("after the effect")
        return f"notified {who}"

    calls = [
        {"name": "notify", "args": {"who": "ann"}, "id": "call_0"},
        {"name": "notify", "args": {"who": "bob"}, "id": "call_1"},
    ]
    model = FakeModel(
        messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="done")])
    )
    ledger = ToolLedger(saver, default_policy="retry")
    graph = agents.create_agent(
        model, tools=[notify], middleware=[ledger.middleware()], checkpointer=saver
    )
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage(content="go")]}, CONFIG)
    out = graph.invoke(None, CONFIG)
    assert out["messages"][-1].content == "done"
    assert sorted(sent) == ["ann", "ann", "bob"]  # ann retried (policy), bob ran once
    entries = ledger.entries("t")
    assert sorted((e.name, e.args["who"], e.attempts) for e in entries if not e.model_call) == [
        ("notify", "ann", 2),
        ("notify", "bob", 1),
    ]
    assert [(e.name, e.state) for e in entries if e.model_call] == [("model", "result")] * 2
    assert os.path.exists(tmp_path)
