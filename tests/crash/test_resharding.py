"""A Redis Cluster resharding a thread's slot while a run is under way.

A run waits in a node (an event) while its thread's slot moves to another primary of a
private 3-primary cluster, by hand as ``redis-cli --cluster reshard`` does it (IMPORTING
and MIGRATING, MIGRATE of the slot's keys, SETSLOT NODE): then it goes on. Whole (the
next round trip gets MOVED), or half way (the slot migrating: the thread's keys split
between the two nodes, so a script over them gets TRYAGAIN, ridden out as a passing
state until the move completes, on the saver's own "lost Redis" warning). Each run ends
with every step once, as an uninterrupted run, and nothing left on the old node. A slot
moved to a node that does not answer for a while: redis-py's cluster pipeline follows
MOVED command by command and hands back the lost connection as a reply, not raised; the
saver sends the batch again, as for any lost connection, and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.cluster

from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.crash.test_failover import SAFETY, STEPS, steps_graph

OPTIONS = {"cluster": True, "failover_timeout": 60}


class Lost(logging.Handler):
    """Set once the saver logs that it lost Redis (a passing state: TRYAGAIN)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "lost Redis" in record.getMessage():
            self.seen.set()


@pytest.fixture
def lost() -> Iterator[Lost]:
    handler = Lost()
    logger = logging.getLogger("langgraph_durable")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


class Slot:
    """One slot of the cluster, moved from its owner to another primary by hand."""

    def __init__(self, cluster_url: str, key: str, target_port: int | None = None) -> None:
        """To the primary on ``target_port``, or to another primary that holds slots."""
        self.cluster = redis.cluster.RedisCluster.from_url(cluster_url)
        self.slot = self.cluster.keyslot(key)
        source = self.cluster.get_node_from_key(key)
        if target_port is None:
            target_port = next(
                n.port for n in self.cluster.get_primaries() if n.name != source.name
            )
        self.source = redis.Redis(host=source.host, port=source.port)
        self.target = redis.Redis(host="127.0.0.1", port=target_port)
        self.target_port = target_port

    def _id(self, node: redis.Redis) -> str:
        return node.execute_command("CLUSTER MYID").decode()  # type: ignore[no-any-return]

    def begin(self) -> None:
        self.target.execute_command(
            "CLUSTER SETSLOT", self.slot, "IMPORTING", self._id(self.source)
        )
        self.source.execute_command(
            "CLUSTER SETSLOT", self.slot, "MIGRATING", self._id(self.target)
        )

    def keys(self) -> list[bytes]:
        return self.source.execute_command("CLUSTER GETKEYSINSLOT", self.slot, 1000)  # type: ignore[no-any-return]

    def migrate(self, keys: list[bytes]) -> None:
        if keys:
            self.source.execute_command(
                "MIGRATE", "127.0.0.1", self.target_port, "", 0, 5000, "KEYS", *keys
            )

    def finish(self) -> None:
        self.migrate(self.keys())
        target_id = self._id(self.target)
        others = [redis.Redis(host=n.host, port=n.port) for n in self.cluster.get_primaries()]
        for node in (self.target, self.source, *others):  # every primary learns the owner
            node.execute_command("CLUSTER SETSLOT", self.slot, "NODE", target_id)

    def owner_port(self) -> int:
        slots = self.target.cluster("slots")
        owners = [r[2][1] for r in slots if r[0] <= self.slot <= r[1]]
        return owners[0]  # type: ignore[no-any-return]


class Gate:
    """The run waits in node KILL_AT until the test let it go on."""

    def __init__(self) -> None:
        self.reached, self.go = threading.Event(), threading.Event()

    def at_kill(self) -> None:  # in the graph's node
        self.reached.set()
        assert self.go.wait(SAFETY)


def thread_key(saver: Any, thread_id: str) -> str:
    return saver.keys.thread(thread_id).with_twins()[0]  # type: ignore[no-any-return]


def test_a_slot_moved_whole_mid_run(cluster_url: str) -> None:
    gate = Gate()
    config = {"configurable": {"thread_id": "moved"}}
    with RedisSaver.from_conn_string(cluster_url, key_prefix="rs-whole", **OPTIONS) as saver:
        graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
        runner = threading.Thread(target=lambda: out.append(graph.invoke({"trail": []}, config)))
        out: list[Any] = []
        runner.start()
        assert gate.reached.wait(SAFETY)
        slot = Slot(cluster_url, thread_key(saver, "moved"))
        slot.begin()
        slot.finish()  # the client still routes the slot to the old owner: MOVED
        gate.go.set()
        runner.join(SAFETY)
        assert out and out[0]["trail"] == list(range(STEPS))
        assert graph.get_state(config).values["trail"] == list(range(STEPS))
        assert slot.owner_port() == slot.target_port and slot.keys() == []


def test_a_slot_migrating_mid_run_is_ridden_out(cluster_url: str, lost: Lost) -> None:
    gate = Gate()
    config = {"configurable": {"thread_id": "migrating"}}
    with RedisSaver.from_conn_string(cluster_url, key_prefix="rs-half", **OPTIONS) as saver:
        graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
        out: list[Any] = []
        runner = threading.Thread(target=lambda: out.append(graph.invoke({"trail": []}, config)))
        runner.start()
        assert gate.reached.wait(SAFETY)
        key = thread_key(saver, "migrating")
        slot = Slot(cluster_url, key)
        slot.begin()
        slot.migrate([key.encode()])  # the thread's keys now split between two nodes
        gate.go.set()
        assert lost.seen.wait(SAFETY), "the run's next write met the split (TRYAGAIN)"
        slot.finish()
        runner.join(SAFETY)
        assert out and out[0]["trail"] == list(range(STEPS))
        assert graph.get_state(config).values["trail"] == list(range(STEPS))


async def test_an_async_run_follows_a_slot_moved_mid_run(cluster_url: str) -> None:
    gate = Gate()
    config = {"configurable": {"thread_id": "amoved"}}
    async with AsyncRedisSaver.from_conn_string(
        cluster_url, key_prefix="rs-async", **OPTIONS
    ) as saver:
        graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
        run = asyncio.create_task(graph.ainvoke({"trail": []}, config))
        assert await asyncio.to_thread(gate.reached.wait, SAFETY)
        slot = Slot(cluster_url, thread_key(saver, "amoved"))
        await asyncio.to_thread(lambda: (slot.begin(), slot.finish()))
        gate.go.set()
        out = await asyncio.wait_for(run, SAFETY)
        assert out["trail"] == list(range(STEPS))
        assert (await graph.aget_state(config)).values["trail"] == list(range(STEPS))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_slot_moved_to_a_node_that_stops_answering_is_ridden_out(
    cluster_url: str, lost: Lost, asynchronous: bool
) -> None:
    """The write after the move gets MOVED from the old owner; redis-py follows it alone
    to the new one, which holds writes (CLIENT PAUSE) past the client's socket_timeout:
    the pipeline's reply is a TimeoutError as a value. Sent again, not raised."""
    gate = Gate()
    thread_id = f"paused-{asynchronous}"
    config = {"configurable": {"thread_id": thread_id}}
    options = {**OPTIONS, "socket_timeout": 0.5}
    prefix = f"rs-paused-{asynchronous}"
    slot: Slot | None = None
    ended = threading.Event()  # the run returned or raised (before the fix: raised raw)

    async def move_and_pause(saver: Any) -> None:
        nonlocal slot
        assert await asyncio.to_thread(gate.reached.wait, SAFETY)
        slot = Slot(cluster_url, thread_key(saver, thread_id))
        await asyncio.to_thread(lambda: (slot.begin(), slot.finish()))  # type: ignore[union-attr]
        slot.target.execute_command("CLIENT PAUSE", int(SAFETY * 1000), "WRITE")
        gate.go.set()
        assert await asyncio.to_thread(either, lost.seen, ended), "neither lost nor ended"
        slot.target.execute_command("CLIENT UNPAUSE")

    try:
        if asynchronous:
            async with AsyncRedisSaver.from_conn_string(
                cluster_url, key_prefix=prefix, **options
            ) as asaver:
                graph = steps_graph(gate.at_kill).compile(checkpointer=asaver)
                run = asyncio.create_task(graph.ainvoke({"trail": []}, config))
                run.add_done_callback(lambda _: ended.set())
                await move_and_pause(asaver)
                out = await asyncio.wait_for(run, SAFETY)
                state = (await graph.aget_state(config)).values
        else:
            with RedisSaver.from_conn_string(cluster_url, key_prefix=prefix, **options) as saver:
                graph = steps_graph(gate.at_kill).compile(checkpointer=saver)
                outs: list[Any] = []

                def invoke() -> None:
                    try:
                        outs.append(graph.invoke({"trail": []}, config))
                    finally:
                        ended.set()

                runner = threading.Thread(target=invoke)
                runner.start()
                await move_and_pause(saver)
                await asyncio.to_thread(runner.join, SAFETY)
                assert outs, "the run failed (its error is in the thread's output)"
                out, state = outs[0], graph.get_state(config).values
    finally:
        if slot is not None:
            slot.target.execute_command("CLIENT UNPAUSE")
    assert lost.seen.is_set(), "the write met no lost connection: the test tested nothing"
    assert out["trail"] == list(range(STEPS))
    assert state["trail"] == list(range(STEPS))


def either(first: threading.Event, second: threading.Event) -> bool:
    """Wait until one of two events is set (SAFETY at most): whether one was."""
    deadline = time.monotonic() + SAFETY
    while not (first.wait(0.05) or second.is_set()):
        if time.monotonic() > deadline:
            return False
    return True
