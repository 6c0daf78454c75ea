"""Redis Cluster: a private 3-master cluster on loopback, the conformance suite and real
graphs through both cluster clients. Skipped where no redis-cli can build a cluster."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis.cluster
from langgraph.checkpoint.conformance import checkpointer_test, validate

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.core.keys import KeySchema
from tests.helpers import graphs


async def test_conformance_on_cluster(cluster_url: str) -> None:
    @checkpointer_test(name="AsyncRedisSaver on a 3-master cluster")
    async def factory():
        prefix = f"c{uuid.uuid4().hex[:8]}"
        async with AsyncRedisSaver.from_conn_string(
            cluster_url, cluster=True, key_prefix=prefix
        ) as saver:
            yield saver

    report = await validate(factory)
    failures = {c: r.failures for c, r in report.results.items() if not (r.detected and r.passed)}
    assert not failures, failures
    assert len(report.results) == 8


async def test_graphs_on_cluster(cluster_url: str) -> None:
    async with AsyncRedisSaver.from_conn_string(
        cluster_url, cluster=True, key_prefix="ga"
    ) as saver:
        graph = graphs.react_graph(rounds=3).compile(checkpointer=saver)
        for thread_id in ("a", "b:{c}", "ü"):
            out = await graph.ainvoke(
                graphs.react_input(), {"configurable": {"thread_id": thread_id}}
            )
            assert len(out["messages"]) == 8
        listed = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
        assert listed == {"a", "b:{c}", "ü"}, "list(None) fans out over every node"
    with RedisSaver.from_conn_string(cluster_url, cluster=True, key_prefix="gs") as sync_saver:
        assert isinstance(sync_saver.client, redis.cluster.RedisCluster)
        delta = graphs.delta_graph(steps=8).compile(checkpointer=sync_saver)
        config = {"configurable": {"thread_id": "delta"}}
        out = delta.invoke({"items": [], "n": 0}, config)
        sync_saver.prune(["delta"])
        sync_saver.copy_thread("delta", "delta-copy")
        assert delta.get_state(config).values == out
        assert delta.get_state({"configurable": {"thread_id": "delta-copy"}}).values == out
        sync_saver.delete_for_runs([])
        sync_saver.delete_thread("delta")
        assert delta.get_state(config).values == {}


@pytest.mark.parametrize("client", ["sync", "async"])
async def test_ledger_on_cluster(cluster_url: str, tmp_path: Path, client: str) -> None:
    """Escalation, replay and copy through the cluster clients: every ledger script
    touches only the thread's slot."""
    from langgraph.types import Command

    from langgraph_durable import ToolLedger
    from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, answer
    from tests.integration.test_ledger import Crash, crash_at, crash_graph

    effects = Effects(str(tmp_path / "effects"))
    config = {"configurable": {"thread_id": "ledger:{x}"}}
    prefix = f"lc{uuid.uuid4().hex[:8]}"

    async def drive(saver: RedisSaver | AsyncRedisSaver) -> None:
        ledger = ToolLedger(saver, policies=POLICIES)
        hook = crash_at("tool_after_effect", "send_email")
        graph = crash_graph(ledger, effects, hook=hook).compile(checkpointer=saver)
        with pytest.raises(Crash):
            await graph.ainvoke(START_INPUT, config)
        out = await graph.ainvoke(None, config)
        value = out["__interrupt__"][0].value
        out = await graph.ainvoke(Command(resume=answer(value, effects)), config)
        assert out["messages"][-1].content == "all done"
        sent = [e for e in effects.lines() if e["tool"] == "send_email"]
        assert len(sent) == 3
        await saver.acopy_thread("ledger:{x}", "copy")
        assert len(await ledger.aentries("copy")) == 9

    if client == "async":
        async with AsyncRedisSaver.from_conn_string(
            cluster_url, cluster=True, key_prefix=prefix
        ) as saver:
            await drive(saver)
    else:
        with RedisSaver.from_conn_string(cluster_url, cluster=True, key_prefix=prefix) as saver:
            await drive(saver)


async def test_leases_on_cluster(cluster_url: str) -> None:
    """The lease and the fence live in the thread's slot, beside the data they guard."""
    import asyncio
    import contextvars

    from langgraph_durable import LeaseHeldError, LeaseLostError

    prefix = f"ll{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": "lease:{x}"}}
    async with (
        AsyncRedisSaver.from_conn_string(cluster_url, cluster=True, key_prefix=prefix) as saver,
        AsyncRedisSaver.from_conn_string(cluster_url, cluster=True, key_prefix=prefix) as other,
    ):
        graph = graphs.counter_graph().compile(checkpointer=saver)
        async with saver.alease("lease:{x}") as lease:
            await graph.ainvoke({"value": 1, "trail": []}, config)

            async def another_worker() -> None:
                with pytest.raises(LeaseHeldError):
                    await (
                        graphs.counter_graph()
                        .compile(checkpointer=other)
                        .ainvoke({"value": 1, "trail": []}, config)
                    )
                await saver.client.delete(saver.keys.thread("lease:{x}").lease)  # lapse
                async with other.alease("lease:{x}") as new:
                    assert int(new.token) > int(lease.token)

            await asyncio.create_task(another_worker(), context=contextvars.Context())
            with pytest.raises(LeaseLostError):
                await graph.aupdate_state(config, {"value": 7})
        await saver.adelete_thread("lease:{x}")


@pytest.mark.parametrize("client", ["sync", "async"])
async def test_wait_for_replicas_on_cluster(cluster_url: str, client: str) -> None:
    """WAIT goes to the node that took the write; the test cluster has no replicas."""
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_durable import NotReplicatedError

    options = {"cluster": True, "key_prefix": f"lw{uuid.uuid4().hex[:8]}"}
    options |= {"wait_for_replicas": 1, "replica_timeout": 0.05}
    config = {"configurable": {"thread_id": "w:{1}", "checkpoint_ns": ""}}
    args = (config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    if client == "async":
        async with AsyncRedisSaver.from_conn_string(cluster_url, **options) as saver:
            with pytest.raises(NotReplicatedError) as err:
                await saver.aput(*args)
            await saver.adelete_thread("w:{1}")
    else:
        with RedisSaver.from_conn_string(cluster_url, **options) as sync_saver:
            with pytest.raises(NotReplicatedError) as err:
                sync_saver.put(*args)
            sync_saver.delete_thread("w:{1}")
    assert err.value.acknowledged == 0


def test_command_line_on_cluster(cluster_url: str) -> None:
    """threads and verify --all fan out over every node; a held lease shows its holder."""
    import json
    import os
    import sys

    prefix = f"lcli{uuid.uuid4().hex[:8]}"
    names = ["a", "b", "c", "d", "e"]  # spread over the masters' slots
    with RedisSaver.from_conn_string(cluster_url, cluster=True, key_prefix=prefix) as saver:
        graph = graphs.react_graph(rounds=1).compile(checkpointer=saver)
        for name in names:
            graph.invoke(graphs.react_input(), {"configurable": {"thread_id": name}})
        nodes = {saver.client.get_node_from_key(saver.keys.thread(n).cps).name for n in names}
        assert len(nodes) > 1
        env = {**os.environ, "REDIS_URL": cluster_url, "LGD_CLUSTER": "1"}

        def cli(*args: str) -> Any:
            done = subprocess.run(
                [sys.executable, "-m", "langgraph_durable.cli", *args, "--key-prefix", prefix]
                + ["--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            return json.loads(done.stdout)

        with saver.lease("c") as lease:
            rows = cli("threads")
            assert sorted(r["thread_id"] for r in rows) == names
            assert {r["thread_id"]: r["leased_to"] for r in rows}["c"] == lease.owner
        reports = cli("verify", "--all")
        assert sorted(r["thread_id"] for r in reports) == names
        stored = len(list(saver.list({"configurable": {"thread_id": "a"}})))
        assert stored > 1 and all(r["ok"] and r["intact"] == stored for r in reports)
        for name in names:
            saver.delete_thread(name)


@pytest.mark.parametrize("client", ["sync", "async"])
async def test_refresh_on_read_and_url_shapes_on_cluster(cluster_url: str, client: str) -> None:
    """``redis_url=`` with ``cluster=True`` and ``refresh_on_read``: a read gives every key
    of the thread (one slot) its ttl again. The keys' ttl is shortened by hand first, so
    the refresh shows at once, without waiting for it to run down."""
    prefix = f"lr{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": "refresh:{x}"}}
    options: dict[str, Any] = {"cluster": True, "key_prefix": prefix, "ttl": 3600}
    direct = redis.cluster.RedisCluster.from_url(cluster_url)
    try:
        if client == "async":
            async with AsyncRedisSaver(redis_url=cluster_url, refresh_on_read=True, **options) as s:
                graph = graphs.approval_graph().compile(checkpointer=s)
                await graph.ainvoke({"request": "r"}, config)
                keys = [k for k in s.keys.thread("refresh:{x}").all() if direct.exists(k)]
                for key in keys:
                    direct.expire(key, 60)
                assert (await graph.aget_state(config)).next == ("ask",)
        else:
            with RedisSaver(redis_url=cluster_url, refresh_on_read=True, **options) as s:
                graph = graphs.approval_graph().compile(checkpointer=s)
                graph.invoke({"request": "r"}, config)
                keys = [k for k in s.keys.thread("refresh:{x}").all() if direct.exists(k)]
                for key in keys:
                    direct.expire(key, 60)
                assert graph.get_state(config).next == ("ask",)
        assert len(keys) >= 4
        assert all(direct.ttl(key) > 60 for key in keys)
    finally:
        direct.delete(*KeySchema(prefix).thread("refresh:{x}").all())
        direct.close()


def test_a_cluster_clients_read_deadline_is_found(cluster_url: str) -> None:
    """What ``warn_without_deadline`` reads: a cluster client's nodes' socket_timeout."""
    import redis.asyncio.cluster

    from langgraph_durable.io import deadlines

    with redis.cluster.RedisCluster.from_url(cluster_url, socket_timeout=7) as sync:
        assert deadlines.read_deadline(sync) == (True, 7)
    asynchronous = redis.asyncio.cluster.RedisCluster.from_url(cluster_url, socket_timeout=None)
    assert deadlines.read_deadline(asynchronous) == (True, None)
