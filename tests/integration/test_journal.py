"""The model-call journal in-process: replays, streams, structured responses, damage.

A crash is simulated by ``Crash`` (a BaseException nothing catches) right after a model
call was journaled, so LangGraph never saves the model step and runs it again; the
model (``RandomModel``) answers differently on every call, so a replay that asked it
again would show. The real thing (SIGKILLed workers) is in test_journal_crash.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, ConfigurationError, RedisSaver, ToolLedger
from langgraph_durable.ledger.entries import MODEL_POSITION
from tests.helpers.journal_agent import (
    AgentState,
    RandomModel,
    create_agent_graph,
    make_tools,
    toolnode_graph,
)
from tests.helpers.ledger_agent import Effects
from tests.helpers.ledger_crashes import CONFIG, Crash
from tests.helpers.redis_keys import flip_last_bit

START_INPUT = {"messages": [HumanMessage(content="do the chores")]}


def crash_after_first(point: str) -> Callable[..., None]:
    left = [1]

    def hook(at: str, tool: str = "") -> None:
        if at == point and left[0]:
            left[0] -= 1
            raise Crash(f"at {point}")

    return hook


def one_node(body: Callable[[AgentState], Any]) -> StateGraph:
    builder = StateGraph(AgentState)
    builder.add_node("agent", body)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def crash_then_resume(saver: RedisSaver, body: Callable[[AgentState], Any]) -> Any:
    """Run a one-node graph that crashes (``Crash``) once, then resume it: its output."""
    graph = one_node(body).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    return graph.invoke(None, CONFIG)


def model_entries(ledger: ToolLedger) -> list[Any]:
    return [e for e in ledger.entries("t") if e.model_call]


def calls_of(messages: list[Any]) -> list[tuple[str, str]]:
    return [
        (c["id"], repr(c["args"]))
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]


# -- the two agents: a replayed model step gets the recorded answer ------------------------


@pytest.mark.parametrize("own_saver", [True, False], ids=["own saver", "the graph's saver"])
@pytest.mark.parametrize("kind", ["create_agent", "toolnode"])
def test_a_replayed_model_step_returns_the_recorded_answer(
    saver: RedisSaver, tmp_path: Any, kind: str, own_saver: bool
) -> None:
    # Without a saver of its own (as in LangGraph Server) it journals through the graph's.
    ledger = ToolLedger(saver if own_saver else None, policies={"charge": "retry"})
    model = RandomModel(hook=crash_after_first("after_journal"))
    hook = model.hook
    tools = make_tools(Effects(str(tmp_path / "e")))
    if kind == "create_agent":
        graph = create_agent_graph(ledger, model, tools, saver, hook)
    else:
        graph = toolnode_graph(ledger, model, tools, hook).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    reader = ToolLedger(saver)
    first = model_entries(reader)[0].result
    out = graph.invoke(None, CONFIG)
    recorded = first["result"][0] if kind == "create_agent" else first
    assert calls_of(out["messages"][1:2]) == calls_of([recorded])  # not a new answer
    assert model.calls == 3  # each of the run's three model calls asked once
    assert [e.position for e in model_entries(reader)] == [MODEL_POSITION] * 3


@pytest.mark.parametrize("kind", ["create_agent", "toolnode"])
def test_async_replayed_model_step_returns_the_recorded_answer(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str
) -> None:
    async def main() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            ledger = ToolLedger(saver, policies={"charge": "retry"})
            model = RandomModel(hook=crash_after_first("after_journal"))
            tools = make_tools(Effects(str(tmp_path / "e")))
            if kind == "create_agent":
                graph = create_agent_graph(ledger, model, tools, saver, model.hook)
            else:  # its async node streams: the journal records the aggregated message
                builder = toolnode_graph(ledger, model, tools, model.hook)
                graph = builder.compile(checkpointer=saver)
            with pytest.raises(Crash):
                await graph.ainvoke(START_INPUT, CONFIG)
            first = (await ledger.aentries("t"))[0].result
            out = await graph.ainvoke(None, CONFIG)
            recorded = first["result"][0] if kind == "create_agent" else first
            assert isinstance(recorded, AIMessage if kind == "create_agent" else AIMessageChunk)
            assert calls_of(out["messages"][1:2]) == calls_of([recorded])
            assert model.calls == 3

    asyncio.run(main())


def test_middleware_without_journal_asks_the_model_again(saver: RedisSaver, tmp_path: Any) -> None:
    ledger = ToolLedger(saver, policies={"charge": "retry"})
    model = RandomModel(hook=crash_after_first("after_journal"))
    tools = make_tools(Effects(str(tmp_path / "e")))
    graph = create_agent_graph(ledger, model, tools, saver, model.hook, journal=False)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    graph.invoke(None, CONFIG)
    assert model.calls == 4 and model_entries(ledger) == []


# -- ledger.model: streams, batches, failures, places --------------------------------------


def test_stream_is_journaled_once_complete_and_replayed_as_one_chunk(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)
    model = RandomModel()
    journaled = ledger.model(model)
    seen: list[list[Any]] = []
    crash = crash_after_first("streamed")

    def body(state: AgentState) -> dict[str, Any]:
        abandoned = journaled.stream(state["messages"])
        next(abandoned)
        abandoned.close()  # not read to the end: nothing recorded, its place kept
        chunks = list(journaled.stream(state["messages"]))
        seen.append(chunks)
        crash("streamed")
        whole = functools.reduce(operator.add, chunks)
        return {"messages": [AIMessage(content=whole.content, tool_calls=whole.tool_calls)]}

    crash_then_resume(saver, body)
    live, replayed = seen
    assert len(live) > 1 and len(replayed) == 1  # the recorded message, as one chunk
    whole = functools.reduce(operator.add, live)
    assert (replayed[0].content, replayed[0].tool_calls) == (whole.content, whole.tool_calls)
    assert model.calls == 3  # two live streams, and the abandoned one's replay asks again
    assert [e.position for e in model_entries(ledger)] == [MODEL_POSITION + 1]


def test_a_call_that_raises_gives_its_place_back(saver: RedisSaver) -> None:
    """A retried model call is the one at the place, so its answer is the one replayed."""
    ledger = ToolLedger(saver)
    failures = [1]

    class Flaky(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            if failures[0]:
                failures[0] -= 1
                raise RuntimeError("rate limited")
            return super()._generate(*args, **kwargs)

    journaled = ledger.model(Flaky(messages=iter(["first", "second"])))
    crash = crash_after_first("answered")

    def body(state: AgentState) -> dict[str, Any]:
        try:
            answer = journaled.invoke(state["messages"])
        except RuntimeError:
            answer = journaled.invoke(state["messages"])
        crash("answered")
        return {"messages": [answer]}

    out = crash_then_resume(saver, body)
    assert out["messages"][-1].content == "first"
    assert [e.position for e in model_entries(ledger)] == [MODEL_POSITION]


def test_a_node_retried_by_its_retry_policy_asks_the_model_again(saver: RedisSaver) -> None:
    """The answer its failed attempt recorded made the node raise: not replayed."""
    from langgraph.types import RetryPolicy

    ledger = ToolLedger(saver)
    model = RandomModel()
    journaled = ledger.model(model)
    answers: list[Any] = []

    def body(state: AgentState) -> dict[str, Any]:
        answers.append(journaled.invoke(state["messages"]))
        if len(answers) == 1:
            raise ValueError("a transient failure after the model answered")
        return {"messages": [answers[-1]]}

    builder = StateGraph(AgentState)
    builder.add_node(
        "agent",
        body,
        retry_policy=RetryPolicy(retry_on=ValueError, initial_interval=0, jitter=False),
    )
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    out = graph.invoke(START_INPUT, CONFIG)
    assert answers[0] != answers[1] and model.calls == 2
    [entry] = model_entries(ledger)
    assert entry.result == answers[1] == out["messages"][-1] and entry.attempts == 2


def test_batch_and_bind_tools_keep_every_call_journaled_in_order(
    saver: RedisSaver, tmp_path: Any
) -> None:
    ledger = ToolLedger(saver)
    model = RandomModel()
    bound = ledger.model(model).bind_tools(make_tools(Effects(str(tmp_path / "e"))))
    assert type(bound).__name__ == "JournaledModel"
    results: list[list[Any]] = []
    crash = crash_after_first("batched")

    def body(state: AgentState) -> dict[str, Any]:
        results.append(bound.batch([state["messages"], state["messages"][:1]]))
        crash("batched")
        return {"messages": results[-1]}

    crash_then_resume(saver, body)
    assert results[0] == results[1] and model.calls == 2
    assert [e.position for e in model_entries(ledger)] == [MODEL_POSITION, MODEL_POSITION + 1]


def test_outside_a_graph_the_model_is_simply_called(saver: RedisSaver) -> None:
    model = RandomModel()
    journaled = ToolLedger(saver).model(model)
    assert journaled.invoke("hi").content != journaled.invoke("hi").content
    assert model.calls == 2 and journaled._llm_type == "random-fake"  # the model's own


def test_model_refuses_what_is_no_runnable(saver: RedisSaver) -> None:
    ledger = ToolLedger(saver)
    with pytest.raises(ConfigurationError, match="got function.*@ledger.durable"):
        ledger.model(lambda messages: messages)
    journaled = ledger.model(RandomModel())
    assert ledger.model(journaled) is journaled  # journaled once, not twice


def test_a_sync_call_on_the_async_savers_loop_is_refused_with_advice(
    redis_url: str, key_prefix: str
) -> None:
    async def main() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            journaled = ToolLedger(saver).model(RandomModel())

            async def body(state: AgentState) -> dict[str, Any]:
                return {"messages": [journaled.invoke(state["messages"])]}

            graph = one_node(body).compile(checkpointer=saver)
            with pytest.raises(ConfigurationError, match="await model.ainvoke"):
                await graph.ainvoke(START_INPUT, CONFIG)

    asyncio.run(main())


# -- what a replay does with a request that differs, and with damage ------------------------


def test_a_request_that_differs_asks_the_model_again(
    saver: RedisSaver, caplog: pytest.LogCaptureFixture
) -> None:
    """decide.py: the request is compared before anything is replayed; a prompt that
    changed (a timestamp) is another request, so the model is asked again."""
    ledger = ToolLedger(saver)
    model = RandomModel()
    journaled = ledger.model(model)
    extra: list[Any] = []
    answers: list[Any] = []
    crash = crash_after_first("answered")

    def body(state: AgentState) -> dict[str, Any]:
        answers.append(journaled.invoke([*state["messages"], *extra]))
        extra.append(HumanMessage(content=f"it is now {uuid.uuid4()}"))
        crash("answered")
        return {"messages": [answers[-1]]}

    with caplog.at_level(logging.INFO, logger="langgraph_durable"):
        crash_then_resume(saver, body)
    assert answers[0] != answers[1] and model.calls == 2
    assert "had another request; asking the model again" in caplog.text


def test_a_damaged_journal_record_asks_the_model_again(
    saver: RedisSaver, redis_client: Any
) -> None:
    ledger = ToolLedger(saver)
    model = RandomModel()
    journaled = ledger.model(model)
    crash = crash_after_first("answered")

    def body(state: AgentState) -> dict[str, Any]:
        answer = journaled.invoke(state["messages"])
        crash("answered")
        return {"messages": [answer]}

    graph = one_node(body).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    [entry] = model_entries(ledger)
    tk = saver.keys.thread("t")
    flip_last_bit(redis_client, tk.lg, entry.field)
    assert model_entries(ledger)[0].damage
    out = graph.invoke(None, CONFIG)
    assert model.calls == 2 and out["messages"][-1] != entry.result
    [again] = model_entries(ledger)
    assert again.result == out["messages"][-1] and not again.damage
    assert redis_client.hexists(tk.qt, saver.keys.quarantine_field("lg", entry.field))


# -- create_agent's structured_response ----------------------------------------------------


class Weather(BaseModel):
    city: str
    degrees: int


class WeatherDict(TypedDict):
    city: str
    degrees: int


def structured_agent(saver: Any, schema: Any, hook: Callable[..., None]) -> tuple[Any, list[int]]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    asked = [0]

    class Forecaster(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            asked[0] += 1
            call = {"name": schema.__name__, "args": {"city": "Oslo", "degrees": asked[0]}}
            message = AIMessage(content="", tool_calls=[{**call, "id": f"c{asked[0]}"}])
            from langchain_core.outputs import ChatGeneration, ChatResult

            return ChatResult(generations=[ChatGeneration(message=message)])

    class After(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            hook("after_journal")
            return response

    ledger = ToolLedger(saver)
    graph = create_agent(
        Forecaster(messages=iter([])),
        [],
        response_format=schema,
        middleware=[After(), ledger.middleware()],
        checkpointer=saver,
    )
    return graph, asked


@pytest.mark.parametrize("schema", [WeatherDict, Weather])
def test_structured_response_is_journaled(redis_url: str, key_prefix: str, schema: Any) -> None:
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, allowed_types=[Weather]
    ) as saver:
        graph, asked = structured_agent(saver, schema, crash_after_first("after_journal"))
        with pytest.raises(Crash):
            graph.invoke(START_INPUT, CONFIG)
        out = graph.invoke(None, CONFIG)
    assert asked == [1]  # the replay got the recorded answer and structured response
    expected = {"city": "Oslo", "degrees": 1}
    got = out["structured_response"]
    assert (got.model_dump() if isinstance(got, BaseModel) else got) == expected


def test_structured_response_outside_the_allowlist_is_refused_by_name(saver: RedisSaver) -> None:
    graph, _ = structured_agent(saver, Weather, lambda point: None)
    with pytest.raises(ConfigurationError, match="Weather.*allowed_types="):
        graph.invoke(START_INPUT, CONFIG)
