"""A network partition between the worker and the primary, or a primary frozen by
SIGSTOP (a paused VM), while Sentinel promotes a replica: the run goes on on the new
primary, every step once, no write of it on the old one after the cut.

A real primary, two replicas and a sentinel on loopback. The sentinel and the worker
reach the primary through a fault proxy (the replicas reach it directly); the run waits
in a node (an event), the proxy black-holes every byte (no reset: a partition, a
machine gone), the node goes on. The worker's next round trip gets no reply: after its
``socket_timeout`` it counts as a lost server (the failover budget); the sentinel, cut
off the same way, promotes a replica; the worker asks the sentinel again and finishes
there, ``wait_for_replicas=1`` answered by the other replica. The old primary, still a
primary on its side of the partition, never got a byte of it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.crash.test_failover import SAFETY, STEPS, Setup, steps_graph, wait_for
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.servers import start_sentinel, start_server

# The default deadlines (io/deadlines.py): a partition is noticed after socket_timeout.
OPTIONS = {"wait_for_replicas": 1, "replica_timeout": 1, "failover_timeout": 90}


@dataclass
class Cut(Setup):
    """test_failover's setup, with the fault proxy the worker and sentinel go through."""

    proxy: FaultProxy | None = None


@pytest.fixture
def cut(tmp_path: Path) -> Iterator[Cut]:
    (tmp_path / "p").mkdir()
    primary = start_server(str(tmp_path / "p"))
    replicas = []
    for i in range(2):
        (tmp_path / f"r{i}").mkdir()
        options = ("--save", "", "--replicaof", "127.0.0.1", str(primary.port))
        replicas.append(start_server(str(tmp_path / f"r{i}"), *options))
    proxy = FaultProxy("127.0.0.1", primary.port)
    # the sentinel knows the primary by the proxy's address, as the worker does
    watcher = start_sentinel(str(tmp_path), replace(primary, port=proxy.port), down_after_ms=1000)

    def knows_every_replica() -> bool:
        with redis.Redis(port=watcher.port) as sentinel:
            found = sentinel.sentinel_slaves("mymaster")
        return len([r for r in found if r.get("master-link-status") == "ok"]) == 2

    try:
        wait_for(knows_every_replica, "the sentinel did not discover the replicas")
        yield Cut(primary, replicas, watcher, proxy)
    finally:
        proxy.close()
        watcher.stop()
        primary.proc.send_signal(signal.SIGCONT)  # a frozen one stops like the others
        for server in [*replicas, primary]:
            if server.proc.poll() is None:
                server.stop()


class Partition:
    """Cuts the primary off while the run waits in its node, then lets it go on:
    ``partition`` (its proxy drops every byte) or ``freeze`` (SIGSTOP: a paused VM)."""

    def __init__(self, cut: Cut, key: str, how: str = "partition") -> None:
        self.cut, self.key, self.how = cut, key, how
        self.reached, self.cut_off = threading.Event(), threading.Event()
        self.saved_before = -1  # checkpoints the old primary held when it was cut off
        self.at = 0.0  # when it was cut off (time.monotonic())

    def at_kill(self) -> None:  # in the graph's node
        self.reached.set()
        assert self.cut_off.wait(SAFETY)

    def partition(self) -> None:  # in the test's thread
        assert self.reached.wait(SAFETY)
        old = self.cut.master_port()
        with redis.Redis(port=self.cut.primary.port) as primary:
            if self.how == "partition":
                # A checkpoint LangGraph writes in the background (durability "async")
                # may be on its way as the node runs: counted once the cut is made and
                # every byte that passed it is processed (Redis reads every ready
                # connection in a pass of its loop: the PING's pass takes them, the
                # HLEN comes after).
                self.cut.proxy.partition()  # type: ignore[union-attr]
                primary.ping()
                self.saved_before = primary.hlen(self.key)
            else:
                self.saved_before = primary.hlen(self.key)
                self.cut.primary.proc.send_signal(signal.SIGSTOP)
        self.at = time.monotonic()
        self.cut_off.set()
        wait_for(lambda: self.cut.master_port() != old, "the sentinel promoted no replica")


# Without a read deadline the run waited on the cut-off primary until something else
# closed the connection: 66 s here on the release before deadlines. With them, it goes
# on after socket_timeout (10 s) and the promotion: about 17 s here.
NOTICED_WITHIN = 50.0


def check(trail: list[int], partition: Partition) -> None:
    took = time.monotonic() - partition.at
    assert took < NOTICED_WITHIN, f"the run went on {took:.0f} s after the cut"
    assert trail == list(range(STEPS)), "every step once"
    cut = partition.cut
    with redis.Redis(port=cut.master_port()) as new_primary:
        assert new_primary.hlen(partition.key) > partition.saved_before > 0
    if partition.how == "partition":
        with redis.Redis(port=cut.primary.port) as old:
            assert old.info("replication")["role"] == "master", "the old one is still cut off"
            assert old.hlen(partition.key) == partition.saved_before, "no write after the cut"


@pytest.mark.parametrize("how", ["partition", "freeze"])
def test_a_sync_run_goes_on_past_a_partition_and_a_failover(cut: Cut, how: str) -> None:
    partition = Partition(cut, "pt:{cut}:cp", how)
    config = {"configurable": {"thread_id": "cut"}}
    with RedisSaver.from_conn_string(cut.url, key_prefix="pt", **OPTIONS) as saver:
        graph = steps_graph(partition.at_kill).compile(checkpointer=saver)
        cutter = threading.Thread(target=partition.partition)
        cutter.start()
        out = graph.invoke({"trail": []}, config)
        cutter.join(SAFETY)
        assert graph.get_state(config).values["trail"] == out["trail"]
    check(out["trail"], partition)


@pytest.mark.parametrize("how", ["partition", "freeze"])
async def test_an_async_run_goes_on_past_a_partition_and_a_failover(cut: Cut, how: str) -> None:
    partition = Partition(cut, "pa:{acut}:cp", how)
    config = {"configurable": {"thread_id": "acut"}}
    async with AsyncRedisSaver.from_conn_string(cut.url, key_prefix="pa", **OPTIONS) as saver:
        graph = steps_graph(partition.at_kill).compile(checkpointer=saver)
        run = asyncio.create_task(graph.ainvoke({"trail": []}, config))
        await asyncio.to_thread(partition.partition)
        out = await asyncio.wait_for(run, SAFETY)
        assert (await graph.aget_state(config)).values["trail"] == out["trail"]
    check(out["trail"], partition)
