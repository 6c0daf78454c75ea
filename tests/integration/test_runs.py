"""``delete_for_runs`` (LangGraph Server's rollback of a cancelled run) through the run
index: it visits the run's threads only, never SCANs for a run the index knows, and
still finds runs written before the index existed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.core.ops import ScanKeys
from tests.helpers import graphs
from tests.helpers.plans import RoundTrips


def put_run(saver: RedisSaver, thread_id: str, run_id: str, parent: dict | None = None) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=0))
    config = parent or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "loop", "step": 0, "run_id": run_id}, {})


def run_ids_of(saver: RedisSaver, thread_id: str) -> list[str]:
    return [t.metadata["run_id"] for t in saver.list({"configurable": {"thread_id": thread_id}})]


def test_delete_for_runs_visits_only_the_runs_threads(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    for i in range(40):  # other threads, other runs: never visited
        put_run(saver, f"other-{i}", f"run-{i}")
    a = put_run(saver, "a", "r1")
    a = put_run(saver, "a", "r2", parent=a)
    put_run(saver, "b", "r1")
    put_run(saver, "c", "r2")
    assert redis_client.smembers(saver.keys.run("r1")) == {b"a", b"b"}

    trips = RoundTrips(saver)
    saver.delete_for_runs(["r1"])
    assert not any(isinstance(op, ScanKeys) for op in trips.ops), "a SCAN for an indexed run"
    assert "other-" not in repr(trips.ops), "a thread of another run was visited"
    assert run_ids_of(saver, "a") == ["r2"] and run_ids_of(saver, "b") == []
    assert run_ids_of(saver, "c") == ["r2"] and run_ids_of(saver, "other-7") == ["run-7"]
    # A copy keeps its checkpoints' runs: rolling one back reaches the copy too.
    saver.copy_thread("c", "c-copy")
    assert redis_client.smembers(saver.keys.run("r2")) == {b"a", b"c", b"c-copy"}
    saver.delete_for_runs(["r2"])
    assert run_ids_of(saver, "c-copy") == run_ids_of(saver, "a") == []


def legacy(redis_client: redis.Redis, saver: RedisSaver, *run_ids: str) -> None:
    """Make the prefix look written before the run index existed."""
    redis_client.delete(saver.keys.run_index_marker(), *map(saver.keys.run, run_ids))


def test_a_run_the_index_does_not_know_is_found_by_a_scan_until_the_prefix_is_indexed(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    put_run(saver, "old-1", "r-old")
    put_run(saver, "old-2", "r-old")
    put_run(saver, "kept", "r-new")
    legacy(redis_client, saver, "r-old", "r-new")
    trips = RoundTrips(saver)
    saver.delete_for_runs(["r-old"])
    assert any(isinstance(op, ScanKeys) for op in trips.ops), "not indexed: SCAN"
    assert run_ids_of(saver, "old-1") == run_ids_of(saver, "old-2") == []
    assert run_ids_of(saver, "kept") == ["r-new"]
    # The next saver's setup indexes the prefix once: no SCAN for any run after that.
    put_run(saver, "old-3", "r-old")
    legacy(redis_client, saver, "r-old")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as upgraded:
        assert redis_client.exists(upgraded.keys.run_index_marker())
        assert redis_client.smembers(upgraded.keys.run("r-old")) == {b"old-3"}
        assert redis_client.smembers(upgraded.keys.run("r-new")) == {b"kept"}
        trips = RoundTrips(upgraded)
        upgraded.delete_for_runs(["r-old", "never-wrote"])
        assert not any(isinstance(op, ScanKeys) for op in trips.ops)
        assert run_ids_of(upgraded, "old-3") == [] and run_ids_of(upgraded, "kept") == ["r-new"]
    # A saver that may not write (the command line's inspection) leaves it unmarked.
    legacy(redis_client, saver)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, repair_on_read=False):
        assert not redis_client.exists(saver.keys.run_index_marker())


def test_the_index_costs_no_round_trip_expires_with_the_thread_and_leaves_with_it(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=3600) as saver:
        trips = RoundTrips(saver)
        parent = None
        for _ in range(5):
            parent = put_run(saver, "t", "r", parent=parent)
        assert trips.reset() == 5, "put stays one round trip with the run index"
        assert redis_client.smembers(saver.keys.run("r")) == {b"t"}
        assert 0 < redis_client.ttl(saver.keys.run("r")) <= 3600
        put_run(saver, "u", "r")
        saver.delete_thread("t")
        assert redis_client.smembers(saver.keys.run("r")) == {b"u"}
        saver.delete_thread("u")
        assert not redis_client.exists(saver.keys.run("r")), "no set kept for deleted threads"


@pytest.mark.parametrize("ttl", [None, 60])
async def test_rollback_of_a_graph_run_on_a_cluster(cluster_url: str, ttl: Any) -> None:
    """On a cluster the run's set lives in another slot than the thread: with a ttl
    (MULTI, one slot) it goes just before the write, else in the same pipeline."""
    prefix = f"r{uuid.uuid4().hex[:8]}"
    async with AsyncRedisSaver.from_conn_string(
        cluster_url, cluster=True, key_prefix=prefix, ttl=ttl
    ) as saver:
        graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
        config: dict[str, Any] = {"configurable": {"thread_id": "x"}}
        await graph.ainvoke(graphs.react_input(), config)
        first = [t async for t in saver.alist(config)]
        run_id = str(uuid.uuid4())  # where LangGraph Server puts it
        await graph.ainvoke(
            graphs.react_input(), {"configurable": {"thread_id": "x", "run_id": run_id}}
        )
        assert len([t async for t in saver.alist(config)]) > len(first)
        assert await saver.client.smembers(saver.keys.run(run_id)) == {b"x"}
        await saver.adelete_for_runs([run_id])
        assert [t.checkpoint["id"] async for t in saver.alist(config)] == [
            t.checkpoint["id"] for t in first
        ]
        await saver.adelete_thread("x")


def test_a_rollback_after_a_prune_or_a_second_time_searches_no_thread(
    saver: RedisSaver,
) -> None:
    """A thread the run left nothing in (pruned since, or rolled back before) is no
    sign of a damaged index: no SCAN, no warning. A member naming no thread is."""
    a = put_run(saver, "a", "r1")
    put_run(saver, "a", "r2", parent=a)
    saver.prune(["a"])  # r1's checkpoint goes; the index still names "a" for r1
    trips = RoundTrips(saver)
    saver.delete_for_runs(["r1"])
    saver.delete_for_runs(["r2"])
    saver.delete_for_runs(["r2"])  # a retried rollback
    assert not any(isinstance(op, ScanKeys) for op in trips.ops)
    assert run_ids_of(saver, "a") == []
