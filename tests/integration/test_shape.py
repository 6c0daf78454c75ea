"""The shape of a run, so a regression fails a test instead of a benchmark: round trips
and Redis commands per superstep of a real graph, and records read per call."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from langgraph_durable import RedisSaver
from langgraph_durable.core.ops import Batch, Command, Script
from tests.helpers import graphs
from tests.helpers.plans import RoundTrips


def commands(op: Any) -> list[str]:
    """What one round trip sends: script names and command verbs."""
    if isinstance(op, Script):
        return [op.name]
    if isinstance(op, Command):
        return [str(op.args[0])]
    assert isinstance(op, Batch), op
    return [c.name if isinstance(c, Script) else str(c[0]) for c in [*op.ahead, *op.commands]]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_react_run_costs_one_round_trip_per_write(saver: RedisSaver, durability: str) -> None:
    rounds = 6
    graph = graphs.react_graph(rounds=rounds).compile(checkpointer=saver)
    trips = RoundTrips(graph.checkpointer)  # the graph runs on its own (allowlisted) copy
    config: dict[str, Any] = {"configurable": {"thread_id": f"shape-{durability}"}}
    graph.invoke(graphs.react_input(), config, durability=durability)
    checkpoints = len(list(saver.list(config)))
    reads = [op for op in trips.ops if "read_checkpoints" in commands(op)]
    assert len(reads) == 1, "one read: the run's start"
    ops = [op for op in trips.ops if op not in reads]
    kinds = Counter(
        "put"
        if "put_checkpoint" in names
        else "put_writes"
        if "put_writes" in names
        else "+".join(names)
        for names in map(commands, ops)
    )
    # One read to start, one round trip per checkpoint and per task's writes, nothing else.
    supersteps = 2 * rounds + 1  # agent, tools, ..., agent
    assert kinds["put"] == checkpoints
    assert kinds["put_writes"] <= supersteps + 1  # each task's writes, once
    assert sum(kinds.values()) == kinds["put"] + kinds["put_writes"], kinds
    for op in ops:
        names = commands(op)
        if "put_checkpoint" in names:
            # the window of elements named without sending (one HMGET, the quarantine's
            # EXISTS; HSTRLEN only for elements over 16 KB), the big changed values
            # (HSETNX each), new elements (HSET each), the script, at most the run index
            allowed = {"HMGET", "EXISTS", "HSETNX", "HSET", "put_checkpoint", "SADD", "EXPIRE"}
            assert set(names) <= allowed, names
            assert names.count("put_checkpoint") == 1
            assert names.count("HMGET") <= 1 and names.count("EXISTS") <= 1, names
        elif "put_writes" in names:
            assert names == ["put_writes"]


def test_a_resumed_thread_reads_its_checkpoint_in_one_round_trip(saver: RedisSaver) -> None:
    graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
    config: dict[str, Any] = {"configurable": {"thread_id": "resume"}}
    graph.invoke(graphs.react_input(), config)
    trips = RoundTrips(graph.checkpointer)  # the graph runs on its own (allowlisted) copy
    graph.get_state(config)
    assert trips.reset() == 1, "get_state of a thread this saver wrote: one round trip"
    assert trips.checkpoints_read() == 0  # reset cleared them; count the next read
    graph.get_state(config)
    assert trips.checkpoints_read() == 1, "get_tuple reads exactly one checkpoint"
