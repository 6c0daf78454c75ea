"""Replay follows LangGraph's branches: a recorded decision answers only the execution
that made it (ledger/executions.py).

Real compiled graphs on a real Redis, for both agents (``create_agent`` with
``ledger.middleware()`` and a hand-written ToolNode agent with ``ledger.model`` and
``ledger.tool_node``), sync and async: two regenerates from one checkpoint, a second
fork whose calls have the same and other arguments, an edited question resubmitted, a
run after a rollback (with run ids, as LangGraph Server gives them, also when the
rolled-back run saved no checkpoint), and a model answer that makes its node raise.
Every fork's calls are new calls (new idempotency keys, effects again), never answered
from another branch and never asked about as a divergence.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import AsyncRedisSaver, InvalidConfigError, RedisSaver, ToolLedger
from langgraph_durable.core.keys import KeySchema
from tests.helpers.journal_agent import (
    AgentState,
    RandomModel,
    create_agent_graph,
    make_tools,
    toolnode_graph,
)
from tests.helpers.ledger_agent import Effects
from tests.helpers.ledger_crashes import Crash

pytest.importorskip("langchain.agents")

QUESTION = {"messages": [HumanMessage(content="do the chores")]}
POLICIES: dict[str, Any] = {"charge": "retry"}


def thread(run_id: str | None = None, **configurable: Any) -> dict[str, Any]:
    """A run's config; with ``run_id`` as LangGraph Server gives it (configurable and
    metadata, which the checkpoints keep)."""
    config: dict[str, Any] = {"configurable": {"thread_id": "t", **configurable}}
    if run_id:
        config["configurable"]["run_id"] = run_id
        config["metadata"] = {"run_id": run_id}
    return config


class SameCallsModel(RandomModel):
    """Asks for the same charge in every answer (fresh tool-call ids), then ends."""

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        if any(isinstance(m, AIMessage) and m.tool_calls for m in messages):
            return AIMessage(content=f"done {self.calls}")
        call = {"name": "charge", "args": {"amount": 10, "memo": "fee"}, "id": f"c{self.calls}"}
        return AIMessage(content=f"charging {self.calls}", tool_calls=[call])


class EchoModel(RandomModel):
    """Answers the last question by its words (so a replayed answer shows), no tools."""

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        self.hook("model_answered")
        asked = [m for m in messages if isinstance(m, HumanMessage)][-1].content
        return AIMessage(content=f"about {asked!r} (call {self.calls})")


def agent(kind: str, ledger: ToolLedger, model: Any, effects: Effects, saver: Any) -> Any:
    tools = make_tools(effects)
    if kind == "create_agent":
        return create_agent_graph(ledger, model, tools, saver, model.hook)
    return toolnode_graph(ledger, model, tools, model.hook).compile(checkpointer=saver)


def before_first_model_call(history: list[Any]) -> dict[str, Any]:
    """The config of the checkpoint the thread's first model call started from."""
    states = sorted(history, key=lambda s: s.config["configurable"]["checkpoint_id"])
    return next(s.config for s in states if s.next and s.next[0] in ("model", "agent"))


def effect_keys(effects: Effects) -> Counter[str]:
    return Counter(e["key"] for e in effects.lines() if e["kind"] == "effect")


def asked(effects: Effects) -> list[Any]:
    return [e for e in effects.lines() if e["kind"] == "asked"]


async def drive(graph: Any, mode: str, payload: Any, config: dict[str, Any]) -> Any:
    if mode == "async":
        return await graph.ainvoke(payload, config)
    return await asyncio.to_thread(graph.invoke, payload, config)


async def history_of(graph: Any, mode: str) -> list[Any]:
    if mode == "async":
        return [s async for s in graph.aget_state_history(thread())]
    return list(graph.get_state_history(thread()))


def saver_for(mode: str, redis_url: str, key_prefix: str) -> Any:
    cls = AsyncRedisSaver if mode == "async" else RedisSaver
    return cls.from_conn_string(redis_url, key_prefix=key_prefix)


class _Both:
    """Opens a sync or an async saver with one ``async with``."""

    def __init__(self, mode: str, redis_url: str, key_prefix: str) -> None:
        self.cm = saver_for(mode, redis_url, key_prefix)
        self.mode = mode

    async def __aenter__(self) -> Any:
        if self.mode == "async":
            return await self.cm.__aenter__()
        return self.cm.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        if self.mode == "async":
            await self.cm.__aexit__(*exc)
        else:
            self.cm.__exit__(*exc)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])
KINDS = pytest.mark.parametrize("kind", ["create_agent", "toolnode"])


# -- forks -----------------------------------------------------------------------------


@MODES
@KINDS
def test_two_regenerates_from_one_checkpoint_ask_the_model_and_run_their_calls(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, mode: str
) -> None:
    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            effects = Effects(str(tmp_path / "effects"))
            model = RandomModel()
            graph = agent(kind, ToolLedger(saver, policies=POLICIES), model, effects, saver)
            first = await drive(graph, mode, QUESTION, thread())
            assert model.calls == 3 and len(effect_keys(effects)) == 6
            fork = before_first_model_call(await history_of(graph, mode))
            outs = [await drive(graph, mode, None, fork) for _ in range(2)]
            # each regenerate asked the model anew and ran its own calls once
            assert model.calls == 9
            keys = effect_keys(effects)
            assert len(keys) == 18 and set(keys.values()) == {1}, keys
            assert not asked(effects)  # no divergence, no unknown outcome
            answers = [out["messages"][1].content for out in (first, *outs)]
            assert len(set(answers)) == 3, answers
            entries = await ToolLedger(saver).aentries("t") if mode == "async" else None
            if entries is None:
                entries = ToolLedger(saver).entries("t")
            # the two regenerates met at each of their places: two executions there
            places: dict[tuple[Any, ...], set[str]] = {}
            for e in entries:
                places.setdefault((e.checkpoint_ns, e.step, e.task), set()).add(e.execution)
            met = Counter(len(x) for x in places.values())
            assert set(met) == {1, 2} and met[2] >= 5, met

    asyncio.run(main())


@MODES
@KINDS
def test_a_second_fork_with_the_same_arguments_runs_its_call_again(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, mode: str
) -> None:
    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            effects = Effects(str(tmp_path / "effects"))
            model = SameCallsModel()
            graph = agent(kind, ToolLedger(saver, policies=POLICIES), model, effects, saver)
            await drive(graph, mode, QUESTION, thread())
            fork = before_first_model_call(await history_of(graph, mode))
            await drive(graph, mode, None, fork)
            await drive(graph, mode, None, fork)
            charges = [e for e in effects.lines() if e["kind"] == "effect"]
            # same tool, same arguments, three executions: three calls, three keys
            assert [c["args"] for c in charges] == [{"amount": 10, "memo": "fee"}] * 3
            assert len({c["key"] for c in charges}) == 3
            assert not asked(effects)

    asyncio.run(main())


# -- an edited question ------------------------------------------------------------------


async def head_of(graph: Any, mode: str) -> dict[str, Any]:
    state = await graph.aget_state(thread()) if mode == "async" else graph.get_state(thread())
    return state.config  # type: ignore[no-any-return]


@MODES
@KINDS
def test_an_edited_question_resubmitted_gets_a_new_answer(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, mode: str
) -> None:
    """As a chat UI edits a message: the edited question (same message id) is sent as the
    input of the checkpoint the original was sent to, so its model call lands on the
    original's place."""

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            model = EchoModel()
            graph = agent(kind, ToolLedger(saver), model, Effects(str(tmp_path / "e")), saver)
            await drive(graph, mode, {"messages": [HumanMessage("hello")]}, thread())
            before = await head_of(graph, mode)
            out = await drive(graph, mode, QUESTION, thread())
            assert "do the chores" in out["messages"][-1].content
            question = out["messages"][-2]
            edited = {"messages": [HumanMessage(content="water the plants", id=question.id)]}
            again = await drive(graph, mode, edited, before)
            assert "water the plants" in again["messages"][-1].content
            assert model.calls == 3

    asyncio.run(main())


@MODES
@KINDS
def test_a_question_edited_by_update_state_gets_a_new_answer(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, mode: str
) -> None:
    """The edited question is put where the original was sent (``update_state`` of the
    checkpoint it was sent to, as its input), and the thread simply continues: the model
    call lands on the original's place, from a new checkpoint."""

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            model = EchoModel()
            graph = agent(kind, ToolLedger(saver), model, Effects(str(tmp_path / "e")), saver)
            await drive(graph, mode, {"messages": [HumanMessage("hello")]}, thread())
            out = await drive(graph, mode, QUESTION, thread())
            question = out["messages"][-2]
            inputs = [s for s in await history_of(graph, mode) if s.metadata["source"] == "input"]
            sent = max(inputs, key=lambda s: s.metadata["step"]).config  # the question's
            edited = {"messages": [HumanMessage(content="water the plants", id=question.id)]}
            if mode == "async":
                await graph.aupdate_state(sent, edited, as_node=START)
            else:
                graph.update_state(sent, edited, as_node=START)
            again = await drive(graph, mode, None, thread())
            assert "water the plants" in again["messages"][-1].content
            assert model.calls == 3

    asyncio.run(main())


# -- rollback ----------------------------------------------------------------------------


def trade_agent(
    ledger: ToolLedger, model: Any, effects: Effects, saver: Any, kind: str = "toolnode"
) -> Any:
    """An agent whose model turns the last request into one ``trade`` call."""

    def trade(order: str) -> str:
        """Place an order."""
        effects.append(tool="trade", kind="effect", key=None, args={"order": order})
        model.hook("tool_after_effect")
        return f"placed {order}"

    from langchain_core.tools import StructuredTool

    tools = [StructuredTool.from_function(trade)]
    if kind == "create_agent":
        return create_agent_graph(ledger, model, tools, saver, model.hook)
    return toolnode_graph(ledger, model, tools, model.hook).compile(checkpointer=saver)


class OrderModel(RandomModel):
    """Turns the newest request into a trade; once it was placed, says so."""

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        if not isinstance(messages[-1], HumanMessage):
            return AIMessage(content="ok")
        order = messages[-1].content
        answer = AIMessage(
            content="", tool_calls=[{"name": "trade", "args": {"order": order}, "id": "call_0"}]
        )
        self.hook("model_answered")
        return answer


class CrashOnce:
    """A hook that dies at ``point`` once, after ``arm()``."""

    def __init__(self, point: str, armed: bool = True) -> None:
        self.point, self.armed = point, armed

    def arm(self) -> None:
        self.armed = True

    def __call__(self, at: str, tool: str = "") -> None:
        if at == self.point and self.armed:
            self.armed = False
            raise Crash(at)


@MODES
@KINDS
def test_a_run_after_a_rollback_is_not_answered_from_the_rolled_back_one(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, mode: str
) -> None:
    """Double-texting with ``multitask_strategy="rollback"``: "buy" is rolled back after
    the model answered; the next request's model call lands on the same place."""

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            effects = Effects(str(tmp_path / "effects"))
            crash = CrashOnce("after_journal", armed=False)
            model = OrderModel(hook=crash)
            graph = trade_agent(ToolLedger(saver), model, effects, saver, kind)
            await drive(graph, mode, {"messages": [HumanMessage("hello")]}, thread("r0"))
            crash.arm()
            with pytest.raises(Crash):
                await drive(graph, mode, {"messages": [HumanMessage("buy 100 ACME")]}, thread("r1"))
            if mode == "async":
                await saver.adelete_for_runs(["r1"])
            else:
                saver.delete_for_runs(["r1"])
            sell = {"messages": [HumanMessage("sell everything")]}
            out = await drive(graph, mode, sell, thread("r2"))
            orders = [e["args"]["order"] for e in effects.lines() if e["kind"] == "effect"]
            assert orders == ["hello", "sell everything"], orders
            assert out["messages"][-1].content == "ok"
            ledger = ToolLedger(saver)
            entries = await ledger.aentries("t") if mode == "async" else ledger.entries("t")
            rolled = [e for e in entries if e.rolled_back]
            assert rolled and {e.run_id for e in rolled} == {"r1"}
            assert all(e.model_call for e in rolled)

    asyncio.run(main())


def approval_graph(ledger: ToolLedger, model: Any, saver: Any) -> Any:
    """One node that asks a human for the order, then asks the model about it."""
    journaled = ledger.model(model)

    def node(state: AgentState) -> dict[str, Any]:
        order = interrupt("what should I do?")
        answer = journaled.invoke([HumanMessage(content=order)])
        model.hook("after_journal")
        return {"messages": [answer]}

    builder = StateGraph(AgentState)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


@MODES
def test_a_rolled_back_resume_that_saved_nothing_never_answers_the_next(
    redis_url: str, key_prefix: str, mode: str
) -> None:
    """Both resumes start from the same saved checkpoint (LangGraph gives their tasks the
    same id): only the rollback's record tells them apart."""

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            model = EchoModel(hook=CrashOnce("after_journal"))
            graph = approval_graph(ToolLedger(saver), model, saver)
            await drive(graph, mode, {"messages": []}, thread("r0"))
            with pytest.raises(Crash):
                await drive(graph, mode, Command(resume="buy 100 ACME"), thread("r1"))
            if mode == "async":
                await saver.adelete_for_runs(["r1"])
            else:
                saver.delete_for_runs(["r1"])
            out = await drive(graph, mode, Command(resume="sell everything"), thread("r2"))
            assert "sell everything" in out["messages"][-1].content
            assert model.calls == 2

    asyncio.run(main())


# -- an answer that makes its node raise --------------------------------------------------


@MODES
def test_an_answer_that_makes_its_node_raise_is_asked_again(
    redis_url: str, key_prefix: str, mode: str
) -> None:
    """Its replay is given once (the node may have died for another reason); a replay
    that fails again falls back to a fresh call (ledger/journal.py)."""

    class Unparseable(ValueError):
        pass

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            model = EchoModel()
            journaled = ToolLedger(saver).model(model)
            seen: list[str] = []

            async def node(state: AgentState) -> dict[str, Any]:
                if mode == "async":
                    answer = await journaled.ainvoke(state["messages"])
                else:
                    answer = journaled.invoke(state["messages"])
                seen.append(answer.content)
                if "(call 1)" in answer.content:  # the first answer does not parse
                    raise Unparseable(answer.content)
                return {"messages": [answer]}

            builder = StateGraph(AgentState)
            if mode == "async":
                builder.add_node("agent", node)
            else:
                builder.add_node("agent", lambda s: asyncio.run(node(s)))
            builder.add_edge(START, "agent")
            builder.add_edge("agent", END)
            graph = builder.compile(checkpointer=saver)
            with pytest.raises(Unparseable):
                await drive(graph, mode, QUESTION, thread())
            with pytest.raises(Unparseable):  # its one replay
                await drive(graph, mode, None, thread())
            out = await drive(graph, mode, None, thread())
            assert "(call 2)" in out["messages"][-1].content
            assert model.calls == 2 and seen[0] == seen[1] != seen[2]

    asyncio.run(main())


@MODES
def test_an_answer_that_makes_create_agents_model_step_raise_is_asked_again(
    redis_url: str, key_prefix: str, mode: str
) -> None:
    """A guardrail middleware (outside the ledger's) refuses the first answer."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    class Refused(ValueError):
        pass

    class Guardrail(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return self.check(handler(request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return self.check(await handler(request))

        def check(self, response: Any) -> Any:
            if "(call 1)" in response.result[0].content:
                raise Refused(response.result[0].content)
            return response

    async def main() -> None:
        async with _Both(mode, redis_url, key_prefix) as saver:
            model = EchoModel()
            ledger = ToolLedger(saver)
            graph = create_agent(
                model, [], middleware=[Guardrail(), ledger.middleware()], checkpointer=saver
            )
            with pytest.raises(Refused):
                await drive(graph, mode, QUESTION, thread())
            with pytest.raises(Refused):  # its one replay
                await drive(graph, mode, None, thread())
            out = await drive(graph, mode, None, thread())
            assert "(call 2)" in out["messages"][-1].content and model.calls == 2

    asyncio.run(main())


def test_an_answer_a_human_is_asked_about_twice_stands(saver: RedisSaver) -> None:
    """Interrupts after an answer are no failure: every resume gets the same answer."""
    model = EchoModel()
    journaled = ToolLedger(saver).model(model)
    seen: list[Any] = []

    def node(state: AgentState) -> dict[str, Any]:
        answer = journaled.invoke(state["messages"])
        seen.append(answer.content)
        first, second = interrupt(f"send {answer.content}?"), interrupt("really?")
        return {"messages": [AIMessage(f"{answer.content}: {first} {second}")]}

    builder = StateGraph(AgentState)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    graph.invoke(QUESTION, thread())
    graph.invoke(Command(resume="yes"), thread())
    graph.invoke(Command(resume="sure"), thread())
    out = graph.invoke(None, thread())
    assert len(set(seen)) == 1 and model.calls == 1, seen
    assert out["messages"][-1].content.endswith(": yes sure")


def test_an_answer_that_fails_after_a_human_saw_it_is_asked_again_in_the_end(
    saver: RedisSaver,
) -> None:
    """Each interrupt answered earns the answer one replay; past those it is asked again,
    so a bad answer a human approved does not wedge the thread."""
    model = EchoModel()
    journaled = ToolLedger(saver).model(model)

    def node(state: AgentState) -> dict[str, Any]:
        answer = journaled.invoke(state["messages"])
        interrupt(f"send {answer.content}?")
        if "(call 1)" in answer.content:
            raise ValueError("the provider refused it")
        return {"messages": [answer]}

    builder = StateGraph(AgentState)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    graph.invoke(QUESTION, thread())
    failures = 0
    for payload in (Command(resume="yes"), None, None, None):
        try:
            out = graph.invoke(payload, thread())
            break
        except ValueError:
            failures += 1
    assert failures == 2 and model.calls == 2
    assert "(call 2)" in out["messages"][-1].content


def test_a_retried_node_asks_again_and_its_answer_is_settled_by_a_call(
    saver: RedisSaver, tmp_path: Any
) -> None:
    """An answer a tool call was made from is settled: it is replayed for good."""
    ledger = ToolLedger(saver, policies=POLICIES)
    effects = Effects(str(tmp_path / "effects"))
    graph = agent("toolnode", ledger, RandomModel(), effects, saver)
    graph.invoke(QUESTION, thread())
    models = [e for e in ledger.entries("t") if e.model_call]
    # the two answers with tool calls were acted on; the last one ended the run
    assert [e.settled for e in models] == [True, True, False]
    assert all(e.replays == 0 for e in models)


# -- what operators see and do -------------------------------------------------------------


def cli(redis_url: str, key_prefix: str, *args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", *args, "--key-prefix", key_prefix],
        env={**__import__("os").environ, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_operators_see_model_answers_by_run_and_branch_and_drop_a_bad_one(
    saver: RedisSaver, redis_url: str
) -> None:
    import json

    model = EchoModel(hook=CrashOnce("after_journal"))
    graph = approval_graph(ToolLedger(saver), model, saver)
    graph.invoke({"messages": []}, thread("r0"))
    with pytest.raises(Crash):  # the answer is recorded, the worker dies
        graph.invoke(Command(resume="buy 100 ACME"), thread("r1"))
    shown = cli(redis_url, saver.key_prefix, "ledger", "t", "--json")
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)
    assert (row["tool"], row["run_id"], row["settled"], row["rolled_back"]) == (
        "model",
        "r1",
        False,
        False,
    )
    assert row["execution"] and "buy 100 ACME" in str(row["result"])
    table = cli(redis_url, saver.key_prefix, "ledger", "t")
    assert "model" in table.stdout and "r1" in table.stdout and "unsettled" in table.stdout
    # an operator drops it: the resume asks the model again, the drop stays on record
    key = row["idempotency_key"]
    bad = cli(redis_url, saver.key_prefix, "drop", "t", "lgd-nope", "--reason", "x")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    done = cli(redis_url, saver.key_prefix, "drop", "t", key, "--reason", "wrong", "--by", "ann")
    assert done.returncode == 0, done.stderr
    again = cli(redis_url, saver.key_prefix, "drop", "t", key, "--reason", "wrong")
    assert again.returncode == 2 and "dropped already" in again.stderr
    out = graph.invoke(Command(resume="buy 100 ACME"), thread("r1"))
    assert "(call 2)" in out["messages"][-1].content and model.calls == 2
    (entry,) = ToolLedger(saver).entries("t")
    assert entry.state == "result" and [d[:2] for d in entry.drops] == [("ann", "wrong")]
    assert "dropped by ann: wrong" in cli(redis_url, saver.key_prefix, "ledger", "t").stdout


def test_a_rolled_back_call_that_may_have_taken_effect_stays_visible(
    saver: RedisSaver, redis_url: str, tmp_path: Any
) -> None:
    import json

    effects = Effects(str(tmp_path / "effects"))
    crash = CrashOnce("tool_after_effect", armed=False)
    model = OrderModel(hook=crash)
    ledger = ToolLedger(saver, policies={"trade": "escalate"})
    graph = trade_agent(ledger, model, effects, saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, thread("r0"))
    crash.arm()
    with pytest.raises(Crash):  # the trade went out; its result was never recorded
        graph.invoke({"messages": [HumanMessage("buy 100 ACME")]}, thread("r1"))
    saver.delete_for_runs(["r1"])
    (waiting,) = ledger.escalations(["t"])
    assert (waiting.kind, waiting.entry.run_id, waiting.args) == (
        "rolled_back",
        "r1",
        {"order": "buy 100 ACME"},
    )
    with pytest.raises(InvalidConfigError, match="resolve"):  # a live run's call: no drop
        hello = next(e for e in ledger.entries("t") if e.run_id == "r0" and not e.model_call)
        ledger.drop("t", str(hello.idempotency_key), reason="x")
    graph.invoke({"messages": [HumanMessage("sell everything")]}, thread("r2"))
    orders = [e["args"]["order"] for e in effects.lines() if e["kind"] == "effect"]
    assert orders == ["hello", "buy 100 ACME", "sell everything"]
    listed = json.loads(cli(redis_url, saver.key_prefix, "escalations", "--json").stdout)
    assert [(r["kind"], r["run_id"]) for r in listed] == [("rolled_back", "r1")]
    ledger.drop("t", str(waiting.idempotency_key), reason="checked the broker", by="ops")
    assert ledger.escalations(["t"]) == []


def test_executions_and_settling_cost_no_round_trip(saver: RedisSaver, tmp_path: Any) -> None:
    """One ledger read per task attempt (the executions' facts ride in it) and one write
    per answer, intent and result (an answer is settled in its first call's intent)."""
    from tests.helpers.plans import RoundTrips

    graph = agent(
        "toolnode",
        ToolLedger(saver, policies=POLICIES),
        RandomModel(),
        Effects(str(tmp_path / "effects")),
        saver,
    )
    trips = RoundTrips(saver)
    graph.invoke(QUESTION, thread())
    # three model tasks and two tool tasks of three calls each
    assert trips.scripts("ledger_read") == 3 + 2
    assert trips.scripts("ledger_write") == 3 + 2 * 3 * 2


def test_an_answer_dropped_by_an_operator_stays_dropped_when_a_later_step_settles_it(
    saver: RedisSaver,
) -> None:
    """A settle is made from a copy in memory: it never writes over a newer record."""
    model = EchoModel()
    ledger = ToolLedger(saver)
    graph = agent("toolnode", ledger, model, Effects(os.devnull), saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, thread())
    (answer,) = ToolLedger(saver).entries("t")
    assert answer.model_call and not answer.settled
    ToolLedger(saver).drop("t", str(answer.idempotency_key), reason="rude", by="ops")
    graph.invoke({"messages": [HumanMessage("again")]}, thread())  # its request holds it
    dropped = next(e for e in ToolLedger(saver).entries("t") if e.field == answer.field)
    assert dropped.state == "dropped" and [d[:2] for d in dropped.drops] == [("ops", "rude")]
    with pytest.raises(InvalidConfigError, match="reason"):
        ToolLedger(saver).drop("t", str(answer.idempotency_key), reason=123)  # type: ignore[arg-type]


def test_a_rollback_record_expires_copies_and_goes_with_its_thread(
    redis_url: str, key_prefix: str, redis_client: Any, tmp_path: Any
) -> None:
    """The void record of a rolled-back run lives in the thread's ledger keys: it has the
    thread's ttl, a copy of the thread keeps the run rolled back, delete_thread takes it."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=600) as saver:
        effects = Effects(str(tmp_path / "effects"))
        crash = CrashOnce("after_journal", armed=False)
        model = OrderModel(hook=crash)
        graph = trade_agent(ToolLedger(saver), model, effects, saver)
        graph.invoke({"messages": [HumanMessage("hello")]}, thread("r0"))
        crash.arm()
        with pytest.raises(Crash):
            graph.invoke({"messages": [HumanMessage("buy 100 ACME")]}, thread("r1"))
        saver.delete_for_runs(["r1"])
        tk = saver.keys.thread("t")
        void = KeySchema.ledger_void_field("r1")
        assert redis_client.hexists(tk.lg, void) and 0 < redis_client.ttl(tk.lg) <= 600
        saver.copy_thread("t", "copy")
        copied = ToolLedger(saver).entries("copy")
        assert {e.run_id for e in copied if e.rolled_back} == {"r1"}
        saver.delete_thread("t")
        assert not redis_client.exists(tk.lg, tk.lgx)
