"""``wait_for_replicas`` on a Redis Cluster: WAIT counts the write it follows.

WAIT counts the replicas that acknowledged the writes of *its own connection*. A WAIT
sent on another connection of the node than the write counts the replicas of nothing
(that connection wrote nothing) and answers at once, so a write no replica holds would
be acknowledged. A private cluster of one primary (every slot) and one replica on
loopback; the replica SIGSTOPped, so it acknowledges nothing; writers in threads and
tasks at once, so the pool's connections differ between calls. Every write must fail
with ``NotReplicatedError``; none may return as acknowledged.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import AsyncRedisSaver, NotReplicatedError, RedisSaver
from tests.crash.test_failover import SAFETY, STEPS, steps_graph
from tests.crash.test_resharding import Gate, Slot, thread_key
from tests.helpers import graphs
from tests.helpers.servers import Server, cluster_port, start_server

CLUSTER = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
CLUSTER += ("--save", "", "--appendonly", "no", "--cluster-node-timeout", "60000")
CLUSTER += ("--repl-diskless-sync-delay", "0")  # the replica's first sync at once
WRITERS = 8
PUTS = 3  # each a write and its WAIT


def _wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + 60  # a safety net: it ends on the event
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"the test cluster never got {what}")
        time.sleep(0.02)


def _online(client: redis.Redis) -> bool:
    return client.info("replication").get("slave0", {}).get("state") == "online"


def _known(client: redis.Redis) -> set[str]:
    return {node["node_id"] for node in client.cluster("nodes").values()}


class Nodes(NamedTuple):
    primary: Server  # every slot at first
    replica: Server
    other: Server  # a primary of no slot, until a test moves one to it
    other_replica: Server


@pytest.fixture(scope="module")
def nodes() -> Iterator[Nodes]:
    """A cluster of two primaries, each with a replica; the first holds every slot."""
    if shutil.which("redis-server") is None and shutil.which("valkey-server") is None:
        pytest.skip("no redis-server")
    workdir = Path(tempfile.mkdtemp(prefix="lgd-cluster-replica-"))
    started: list[Server] = []
    try:
        for name in Nodes._fields:
            (workdir / name).mkdir()
            started.append(start_server(str(workdir / name), *CLUSTER, pick_port=cluster_port))
        found = Nodes(*started)
        clients = Nodes(*(n.client() for n in started))
        for start in range(0, 16384, 1024):
            clients.primary.execute_command("CLUSTER ADDSLOTS", *range(start, start + 1024))
        ids = Nodes(*(c.execute_command("CLUSTER MYID").decode() for c in clients))
        for client in clients[1:]:
            client.execute_command("CLUSTER MEET", "127.0.0.1", found.primary.port)
        for client in clients:
            _wait_for(lambda c=client: _known(c) == set(ids), "every node met")
        clients.replica.execute_command("CLUSTER REPLICATE", ids.primary)
        clients.other_replica.execute_command("CLUSTER REPLICATE", ids.other)
        for primary in (clients.primary, clients.other):
            _wait_for(lambda p=primary: _online(p), "its replica in sync")
        for client in clients:
            _wait_for(lambda c=client: c.cluster("info").get("cluster_state") == "ok", "ok")
        yield found
    finally:
        for node in started:
            node.proc.send_signal(signal.SIGCONT)
            node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def frozen(primary: Server, replica: Server) -> Iterator[None]:
    """The replica SIGSTOPped: it acknowledges nothing until the block ends. Before, it
    acknowledges every write so far (a write of our own, then WAIT on its connection)."""
    before = primary.client()
    before.set("{lgd-test}:synced", 1)
    assert before.wait(1, 10_000) == 1, "the replica holds every write so far"
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        p = primary.client()
        # the replica catches up before the next test: its offset equals the primary's
        _wait_for(lambda: p.wait(1, 100) == 1, "its replica back")


OPTIONS = {"cluster": True, "wait_for_replicas": 1, "replica_timeout": 0.05}
OPTIONS |= {"failover_timeout": 0.2}
CONFIGS = [{"configurable": {"thread_id": f"w{n}", "checkpoint_ns": ""}} for n in range(WRITERS)]


def test_no_write_is_acknowledged_by_a_wait_on_another_connection(nodes: Nodes) -> None:
    primary, replica = nodes.primary, nodes.replica
    outcomes: list[str] = []
    with (
        ExitStack() as stack,
        RedisSaver.from_conn_string(primary.url, key_prefix="cw-sync", **OPTIONS) as saver,
    ):
        start = threading.Barrier(WRITERS)

        def read(n: int) -> None:  # the node's pool holds connections that wrote nothing
            start.wait()
            saver.get_tuple(CONFIGS[n])

        def write(n: int) -> None:
            start.wait()
            for _ in range(PUTS):
                try:
                    saver.put(CONFIGS[n], empty_checkpoint(), {}, {})
                except NotReplicatedError:
                    outcomes.append("refused")
                else:
                    outcomes.append("acknowledged")

        for job in (read, None, write):
            if job is None:
                stack.enter_context(frozen(primary, replica))
                continue
            threads = [threading.Thread(target=job, args=(n,)) for n in range(WRITERS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
    assert outcomes == ["refused"] * WRITERS * PUTS


async def test_no_async_write_is_acknowledged_by_a_wait_on_another_connection(
    nodes: Nodes,
) -> None:
    primary, replica = nodes.primary, nodes.replica
    async with AsyncRedisSaver.from_conn_string(
        primary.url, key_prefix="cw-async", **OPTIONS
    ) as saver:
        # the node's pool holds connections that wrote nothing (handed out in turn)
        await asyncio.gather(*(saver.aget_tuple(config) for config in CONFIGS))
        outcomes = []
        with frozen(primary, replica):
            for config in CONFIGS * PUTS:  # one after another, each on the pool's next
                try:
                    await saver.aput(config, empty_checkpoint(), {}, {})
                except NotReplicatedError:
                    outcomes.append("refused")
                else:
                    outcomes.append("acknowledged")
    assert outcomes == ["refused"] * WRITERS * PUTS


def test_writes_are_acknowledged_once_the_replica_holds_them(nodes: Nodes) -> None:
    primary, replica = nodes.primary, nodes.replica
    with RedisSaver.from_conn_string(primary.url, key_prefix="cw-ok", **OPTIONS) as saver:
        graph = graphs.react_graph(rounds=1).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "ok"}}
        graph.invoke(graphs.react_input(), config)
        newest = saver.get_tuple(config)
    assert newest is not None
    copy = redis.Redis(port=replica.port)
    copy.execute_command("READONLY")
    tag = saver.keys.thread("ok").with_twins()[0]
    assert copy.exists(tag), "the replica holds the thread's keys"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_and_its_wait_follow_a_slot_moved_mid_run(nodes: Nodes, mode: str) -> None:
    """The slot moves to the other primary while the run waits: its next write gets
    MOVED, learns the new owner and goes there with its WAIT, which the other primary's
    replica answers (last in the module: the slot stays moved)."""
    gate, thread = Gate(), f"moved-{mode}"
    config = {"configurable": {"thread_id": thread}}
    options = {**OPTIONS, "replica_timeout": 5, "failover_timeout": 30}
    saver_class = RedisSaver if mode == "sync" else AsyncRedisSaver

    async def run_async(graph: Any) -> Any:
        async with saver_class.from_conn_string(  # type: ignore[attr-defined]
            nodes.primary.url, key_prefix="cw-moved", **options
        ) as saver:
            graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
            run = asyncio.create_task(graph.ainvoke({"trail": []}, config))
            await asyncio.to_thread(move, thread_key(saver, thread))
            out = await asyncio.wait_for(run, SAFETY)
            return out, (await graph.aget_state(config)).values

    def move(key: str) -> None:
        assert gate.reached.wait(SAFETY)
        try:
            slot = Slot(nodes.primary.url, key, nodes.other.port)
            slot.begin()
            slot.finish()
        finally:
            gate.go.set()

    if mode == "async":
        out, state = asyncio.run(run_async(None))
    else:
        with RedisSaver.from_conn_string(
            nodes.primary.url, key_prefix="cw-moved", **options
        ) as saver:
            graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
            mover = threading.Thread(target=move, args=(thread_key(saver, thread),))
            mover.start()
            out = graph.invoke({"trail": []}, config)
            mover.join(SAFETY)
            state = graph.get_state(config).values
    assert out["trail"] == state["trail"] == list(range(STEPS))
