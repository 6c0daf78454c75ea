"""Real compiled LangGraph graphs on both savers, compared with InMemorySaver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.helpers import graphs


class Runner:
    """Runs a graph the way a sync or an async application would."""

    def __init__(self, mode: str, saver: Any, url: str, cluster: bool) -> None:
        self.mode = mode
        self.saver = saver
        self.url, self.cluster = url, cluster

    def fresh(self) -> Any:
        """A new sync saver on a new connection to the same data."""
        return RedisSaver.from_conn_string(
            self.url, key_prefix=self.saver.key_prefix, cluster=self.cluster
        )

    def compile(self, builder: Any) -> Any:
        return builder.compile(checkpointer=self.saver)

    async def invoke(self, graph: Any, value: Any, config: dict, **kw: Any) -> Any:
        if self.mode == "async":
            return await graph.ainvoke(value, config, **kw)
        return graph.invoke(value, config, **kw)

    async def state(self, graph: Any, config: dict, **kw: Any) -> Any:
        if self.mode == "async":
            return await graph.aget_state(config, **kw)
        return graph.get_state(config, **kw)

    async def history(self, graph: Any, config: dict) -> list[Any]:
        if self.mode == "async":
            return [s async for s in graph.aget_state_history(config)]
        return list(graph.get_state_history(config))

    async def update(self, graph: Any, config: dict, values: Any, **kw: Any) -> Any:
        if self.mode == "async":
            return await graph.aupdate_state(config, values, **kw)
        return graph.update_state(config, values, **kw)


@pytest.fixture(params=["sync", "async", "cluster-sync", "cluster-async"])
async def runner(request: Any, redis_url: str, key_prefix: str) -> AsyncIterator[Runner]:
    """Every graph test on both savers, on one Redis and on a 3-master Redis Cluster."""
    cluster = request.param.startswith("cluster")
    url = request.getfixturevalue("cluster_url") if cluster else redis_url
    if request.param.endswith("async"):
        async with AsyncRedisSaver.from_conn_string(
            url, key_prefix=key_prefix, cluster=cluster
        ) as saver:
            yield Runner("async", saver, url, cluster)
    else:
        with RedisSaver.from_conn_string(url, key_prefix=key_prefix, cluster=cluster) as saver:
            yield Runner("sync", saver, url, cluster)


def _shape(state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Messages without their random ids (ToolNode makes uuid ids)."""
    return [
        (m.type, m.content, getattr(m, "tool_call_id", None), str(getattr(m, "tool_calls", None)))
        for m in state["messages"]
    ]


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


async def test_react_loop_matches_in_memory(
    runner: Runner,
) -> None:
    graph = runner.compile(graphs.react_graph(rounds=5))
    out = await runner.invoke(graph, graphs.react_input(), cfg("react"))
    expected = (
        graphs.react_graph(rounds=5)
        .compile(checkpointer=InMemorySaver())
        .invoke(graphs.react_input(), cfg("react"))
    )
    assert _shape(out) == _shape(expected)
    assert len(out["messages"]) == 1 + 5 * 2 + 1
    # A fresh saver on a new connection sees the same state and history.
    with runner.fresh() as fresh:
        again = graphs.react_graph(rounds=5).compile(checkpointer=fresh)
        assert again.get_state(cfg("react")).values == out
        steps = [s.metadata["step"] for s in again.get_state_history(cfg("react"))]
        assert steps == list(range(len(steps) - 2, -2, -1))


async def test_interrupt_and_resume(runner: Runner) -> None:
    graph = runner.compile(graphs.approval_graph())
    first = await runner.invoke(graph, {"request": "refund", "decision": ""}, cfg("approve"))
    assert first["__interrupt__"][0].value == {"question": "approve refund?"}
    snapshot = await runner.state(graph, cfg("approve"))
    assert snapshot.next == ("ask",)
    done = await runner.invoke(graph, Command(resume="yes"), cfg("approve"))
    assert done == {"request": "refund [yes]", "decision": "yes"}
    assert (await runner.state(graph, cfg("approve"))).next == ()


async def test_subgraph_namespaces(runner: Runner) -> None:
    graph = runner.compile(graphs.subgraph_graph())
    await runner.invoke(graph, {"log": []}, cfg("sub"))
    state = await runner.state(graph, cfg("sub"), subgraphs=True)
    assert state.next == ("child",)
    child_state = state.tasks[0].state
    assert child_state.values["log"] == ["before", "inner_one"]
    assert child_state.config["configurable"]["checkpoint_ns"].startswith("child:")
    done = await runner.invoke(graph, Command(resume="42"), cfg("sub"))
    assert done["log"] == ["before", "before", "inner_one", "inner_two:42", "after"]
    # root-namespace listing holds only root checkpoints
    root = [
        t
        async for t in _alist(
            runner.saver, {"configurable": {"thread_id": "sub", "checkpoint_ns": ""}}
        )
    ]
    assert root and all(t.config["configurable"]["checkpoint_ns"] == "" for t in root)
    every = [t async for t in _alist(runner.saver, {"configurable": {"thread_id": "sub"}})]
    assert any(t.config["configurable"]["checkpoint_ns"] for t in every)


async def _alist(saver: Any, config: Any, **kw: Any) -> AsyncIterator[Any]:
    async for item in saver.alist(config, **kw):
        yield item


async def test_failed_send_branch_retries_without_rerunning_the_successful_one(
    runner: Runner,
) -> None:
    calls: dict[int, int] = {}
    graph = runner.compile(graphs.fan_out_graph(calls, fail_once={2}, saver=runner.saver))
    with pytest.raises(RuntimeError, match="worker 2 failed"):
        await runner.invoke(graph, {"items": [1, 2, 3], "results": []}, cfg("fan"))
    assert calls == {1: 1, 2: 1, 3: 1}
    done = await runner.invoke(graph, None, cfg("fan"))
    assert calls == {1: 1, 2: 2, 3: 1}, "successful branches must come from their saved writes"
    assert sorted(done["results"]) == ["done 1", "done 2", "done 3"]


async def test_update_state_history_and_time_travel(runner: Runner) -> None:
    graph = runner.compile(graphs.counter_graph())
    out = await runner.invoke(graph, {"value": 1, "trail": []}, cfg("tt"))
    assert out == {"value": 17, "trail": ["a", "b", "c"]}
    history = await runner.history(graph, cfg("tt"))
    assert [s.next for s in history] == [(), ("c",), ("b",), ("a",), ("__start__",)]
    # Time travel: re-run from the checkpoint before "b", after changing the value.
    before_b = history[2]
    forked = await runner.update(graph, before_b.config, {"value": 5})
    replay = await runner.invoke(graph, None, forked)
    assert replay == {"value": 47, "trail": ["a", "b", "c"]}
    after = await runner.history(graph, cfg("tt"))
    assert len(after) == len(history) + 3  # the update and the two re-run steps
    assert after[0].values == replay
    # The original branch is untouched.
    original = await runner.state(graph, history[0].config)
    assert original.values == out


async def test_delta_channel_survives_reload_and_prune(
    runner: Runner,
) -> None:
    graph = runner.compile(graphs.delta_graph(steps=10))
    out = await runner.invoke(graph, {"items": [], "n": 0}, cfg("delta"))
    assert out == {"items": list(range(10)), "n": 10}
    with runner.fresh() as fresh:
        reloaded = graphs.delta_graph(steps=10).compile(checkpointer=fresh)
        assert reloaded.get_state(cfg("delta")).values == out
        before = len(list(fresh.list(cfg("delta"))))
        fresh.prune(["delta"])
        after = len(list(fresh.list(cfg("delta"))))
        assert 1 <= after < before
        assert reloaded.get_state(cfg("delta")).values == out
        # The thread goes on from the pruned state.
        more = graphs.delta_graph(steps=14).compile(checkpointer=fresh)
        assert more.invoke(None, cfg("delta")) == {"items": list(range(10)), "n": 10}
        assert more.invoke({"n": 10}, cfg("delta"))["items"] == list(range(10)) + [10, 11, 12, 13]


@pytest.mark.parametrize(
    "thread_id",
    ["a:b", "{tag}", "}{", "star*?[x]", "with space", "ünïcødé-線程-🚀", "", "%41", "lgd:{x}:cps"],
)
async def test_hostile_thread_ids(runner: Runner, thread_id: str) -> None:
    graph = runner.compile(graphs.counter_graph())
    other = "other-" + thread_id
    out = await runner.invoke(graph, {"value": 2, "trail": []}, cfg(thread_id))
    await runner.invoke(graph, {"value": 3, "trail": []}, cfg(other))
    assert out == {"value": 27, "trail": ["a", "b", "c"]}
    assert (await runner.state(graph, cfg(thread_id))).values == out
    assert len(await runner.history(graph, cfg(thread_id))) == 5
    threads = {t.config["configurable"]["thread_id"] async for t in _alist(runner.saver, None)}
    assert {thread_id, other} <= threads
