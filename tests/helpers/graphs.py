"""Small real LangGraph graphs shared by the tests, the demo and the benchmarks."""

from __future__ import annotations

import operator
import random
import time
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict


def chain(state: type, *nodes: tuple[str, Any]) -> StateGraph:
    """START -> each (name, function) in order -> END."""
    builder = StateGraph(state)
    previous = START
    for name, fn in nodes:
        builder.add_node(name, fn)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


class MessagesState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def lookup(query: str) -> str:
    """Look a query up (deterministic, no side effects)."""
    return f"result for {query}"


_CORPUS: list[str] = []


def prose(length: int, seed: int) -> str:
    """``length`` characters of real English (the standard library's own documentation),
    from a place ``seed`` picks: text that compresses as model output does, unlike
    repeated characters."""
    if not _CORPUS:
        import argparse
        import asyncio
        import collections
        import email
        import functools
        import http.client
        import json
        import logging
        import subprocess
        import textwrap
        import unittest

        modules = (argparse, asyncio, collections, email, functools, http.client, json)
        modules += (logging, subprocess, textwrap, unittest)
        texts = [m.__doc__ or "" for m in modules]
        texts += [getattr(f, "__doc__", None) for m in modules for f in vars(m).values()]
        unique = dict.fromkeys(t for t in texts if isinstance(t, str))
        _CORPUS.append(" ".join(" ".join(t.split()) for t in unique))
    corpus = _CORPUS[0]
    start = random.Random(seed).randrange(0, len(corpus) - length)
    return corpus[start : start + length]


def react_graph(
    rounds: int, payload: int = 200, *, realistic: bool = False, calls: int = 1
) -> StateGraph:
    """A ReAct-shaped loop: the 'model' asks for ``calls`` tool calls (at once) per round,
    `rounds` times, with ``payload`` characters of text (``realistic``: prose, else one
    letter repeated)."""

    def agent(state: MessagesState) -> dict[str, Any]:
        done = sum(isinstance(m, ToolMessage) for m in state["messages"]) // calls
        if done >= rounds:
            return {"messages": [AIMessage(content="final answer", id="ai-final")]}
        tool_calls = [
            {"name": "lookup", "args": {"query": f"q{done}-{i}"}, "id": f"call_{done}_{i}"}
            for i in range(calls)
        ]
        if calls == 1:  # the ids and arguments the benchmark has always used
            tool_calls = [{"name": "lookup", "args": {"query": f"q{done}"}, "id": f"call_{done}"}]
        text = prose(payload, done) if realistic else "x" * payload
        return {"messages": [AIMessage(content=text, id=f"ai-{done}", tool_calls=tool_calls)]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def parallel_tools_graph(rounds: int, payload: int = 200, calls: int = 3) -> StateGraph:
    """``react_graph`` whose 'model' asks for ``calls`` tool calls at once every round."""
    return react_graph(rounds, payload, calls=calls)


def react_input(text: str = "hello") -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text, id="human-0")]}


class ApprovalState(TypedDict):
    request: str
    decision: str


def approval_graph() -> StateGraph:
    def ask(state: ApprovalState) -> dict[str, Any]:
        return {"decision": interrupt({"question": f"approve {state['request']}?"})}

    def act(state: ApprovalState) -> dict[str, Any]:
        return {"request": state["request"] + f" [{state['decision']}]"}

    return chain(ApprovalState, ("ask", ask), ("act", act))


class ParentState(TypedDict):
    log: Annotated[list[str], operator.add]


def subgraph_graph() -> StateGraph:
    def inner_one(state: ParentState) -> dict[str, Any]:
        return {"log": ["inner_one"]}

    def inner_two(state: ParentState) -> dict[str, Any]:
        answer = interrupt("inner question")
        return {"log": [f"inner_two:{answer}"]}

    inner = chain(ParentState, ("inner_one", inner_one), ("inner_two", inner_two))
    return chain(
        ParentState,
        ("before", lambda s: {"log": ["before"]}),
        ("child", inner.compile()),
        ("after", lambda s: {"log": ["after"]}),
    )


class FanState(TypedDict):
    items: list[int]
    results: Annotated[list[str], operator.add]


def fan_out_graph(calls: dict[int, int], fail_once: set[int], saver: Any) -> StateGraph:
    """Send one worker per item; items in `fail_once` raise on their first attempt, once
    the other items' writes are in ``saver`` (the graph's checkpointer)."""

    def worker(arg: dict[str, int], config: RunnableConfig) -> dict[str, Any]:
        item = arg["item"]
        calls[item] = calls.get(item, 0) + 1
        if item in fail_once and calls[item] == 1:
            # LangGraph cancels siblings still running when a task fails (InMemorySaver
            # too): fail only once their writes are saved, so the test is deterministic.
            _wait_for_writes(saver, config, "results", arg["of"] - len(fail_once))
            raise RuntimeError(f"worker {item} failed")
        return {"results": [f"done {item}"]}

    builder = StateGraph(FanState)
    builder.add_node("worker", worker)
    builder.add_conditional_edges(
        START, lambda s: [Send("worker", {"item": i, "of": len(s["items"])}) for i in s["items"]]
    )
    builder.add_edge("worker", END)
    return builder


def _wait_for_writes(saver: Any, config: RunnableConfig, channel: str, count: int) -> None:
    """Return once the thread's newest checkpoint has ``count`` pending writes to
    ``channel`` (called from a node's worker thread, so a sync read is fine)."""
    latest = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
    deadline = time.monotonic() + 120  # a safety net: the wait ends on the writes
    while True:
        tup = saver.get_tuple(latest)
        if tup and sum(ch == channel for _, ch, _ in tup.pending_writes) >= count:
            return
        assert time.monotonic() < deadline, "the other branches' writes were never saved"
        time.sleep(0.01)


def _extend(state: list[int], writes: Sequence[list[int]]) -> list[int]:
    return state + [x for w in writes for x in w]


class DeltaState(TypedDict):
    items: Annotated[list[int], DeltaChannel(_extend, snapshot_frequency=3)]
    n: int


def delta_graph(steps: int) -> StateGraph:
    def step(state: DeltaState) -> dict[str, Any]:
        return {"items": [state["n"]], "n": state["n"] + 1}

    builder = StateGraph(DeltaState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < steps else END, ["step", END]
    )
    return builder


class CounterState(TypedDict):
    value: int
    trail: Annotated[list[str], operator.add]


def counter_graph() -> StateGraph:
    return chain(
        CounterState,
        ("a", lambda s: {"value": s["value"] + 1, "trail": ["a"]}),
        ("b", lambda s: {"value": s["value"] * 10, "trail": ["b"]}),
        ("c", lambda s: {"value": s["value"] - 3, "trail": ["c"]}),
    )
