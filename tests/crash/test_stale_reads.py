"""A read served by a server that has not seen the latest writes repeats no call.

The endpoint a worker uses moved (a proxy, as a managed service's DNS name or a VIP,
now sends new connections to the promoted replica) while the worker's pooled
connection still reaches the old primary: demoted, and cut off from its new primary,
it serves its stale data (``replica-serve-stale-data``, Redis's default). This is also
what a worker meets after a partition heals, before the sentinel demotes the old
primary. Meanwhile another worker resumed the thread on the new primary and ran its
calls there. The first worker resumes too: its reads come from the stale server and
find no record of the calls; its intent writes are refused there (READONLY inside the
script) and sent again on a fresh connection, which reaches the new primary, where
the calls are recorded. Before the fix the retries stayed on the stale connection
until the failover budget ran out (``FailoverTimeoutError``); with that mended, the
intents went over the recorded results and every call ran a second time. Now each
write carries what its decision was made from, and one the server no longer holds
is refused: the task is read again and the recorded results are replayed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, RedisSaver, ToolLedger
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, agent_graph
from tests.helpers.servers import Server, start_server

SAFETY = 60.0  # a safety net on every wait: each ends on its event


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + SAFETY
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def effects_by_call(effects: Effects) -> Counter[str]:
    return Counter(e["tool"] for e in effects.lines() if e["kind"] == "effect")


@dataclass
class Endpoint:
    """A primary (``old``) with a replica (``new``), reached through a proxy."""

    old: Server
    new: Server
    proxy: FaultProxy
    admin_old: redis.Redis
    admin_new: redis.Redis

    def moves(self) -> None:
        """Once ``new`` holds every write: ``new`` promoted; ``old`` demoted, its link to
        ``new`` refused (it keeps serving what it holds); new connections through the
        proxy reach ``new``, open ones still reach ``old``."""

        def replicated() -> bool:
            offset = self.admin_old.info("replication")["master_repl_offset"]
            info = self.admin_new.info("replication")
            return info.get("master_link_status") == "up" and info["slave_repl_offset"] >= offset

        wait_for(replicated, "the replica holds every write")
        self.admin_new.replicaof("no", "one")
        self.admin_old.config_set("masterauth", "not-the-password")  # its sync is refused
        self.admin_old.replicaof("127.0.0.1", str(self.new.port))
        self.proxy.move_to("127.0.0.1", self.new.port)


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = start_server(str(tmp_path / "old")), start_server(str(tmp_path / "new"))
    proxy = FaultProxy("127.0.0.1", old.port)
    admin_old, admin_new = redis.Redis(port=old.port), redis.Redis(port=new.port)
    try:
        admin_new.replicaof("127.0.0.1", str(old.port))
        yield Endpoint(old, new, proxy, admin_old, admin_new)
    finally:
        admin_old.close()
        admin_new.close()
        proxy.close()
        old.stop()
        new.stop()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stale_read_repeats_no_recorded_call(
    endpoint: Endpoint, tmp_path: Path, mode: str
) -> None:
    effects = Effects(str(tmp_path / "effects"))
    config = {"configurable": {"thread_id": f"stale-{mode}"}}
    options: dict[str, Any] = {"key_prefix": "lgdstale", "failover_timeout": 15.0}
    proxy = endpoint.proxy

    def another_worker_runs_the_calls() -> None:
        with RedisSaver.from_conn_string(endpoint.new.url, **options) as other:
            graph = agent_graph(ToolLedger(other, policies=POLICIES), effects)
            graph.compile(checkpointer=other, interrupt_after=["tools"]).invoke(None, config)
        assert effects_by_call(effects) == {"charge": 1, "send_email": 1, "create_ticket": 1}
        assert endpoint.admin_old.info("replication")["master_link_status"] == "down"

    if mode == "sync":
        with RedisSaver.from_conn_string(proxy.url, **options) as worker:
            ledger = ToolLedger(worker, policies=POLICIES)
            graph = agent_graph(ledger, effects).compile(
                checkpointer=worker, interrupt_before=["tools"]
            )
            graph.invoke(START_INPUT, config)  # its connection is kept: it reaches `old`
            endpoint.moves()
            another_worker_runs_the_calls()
            graph.invoke(None, config)
            values = graph.get_state(config).values
    else:

        async def run() -> dict[str, Any]:
            async with AsyncRedisSaver.from_conn_string(proxy.url, **options) as worker:
                ledger = ToolLedger(worker, policies=POLICIES)
                graph = agent_graph(ledger, effects).compile(
                    checkpointer=worker, interrupt_before=["tools"]
                )
                await graph.ainvoke(START_INPUT, config)
                endpoint.moves()
                another_worker_runs_the_calls()
                await graph.ainvoke(None, config)
                return (await graph.aget_state(config)).values

        values = asyncio.run(run())
    assert effects_by_call(effects) == {"charge": 1, "send_email": 1, "create_ticket": 1}
    results = [m.content for m in values["messages"] if m.type == "tool"]
    assert results == ["charged 10", "sent to user0@example.com", "ticket 'follow up' opened"]


def test_an_intent_sent_again_after_its_reply_was_lost_goes_through(tmp_path: Path) -> None:
    """The intent went through but its reply was lost (the connection cut on the way
    back): the saver sends the same write again, which finds its own record, not the
    one its decision was made from (none). It goes through; the call runs once."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class Calls(TypedDict):
        done: list[str]

    server = start_server(str(tmp_path))
    proxy = FaultProxy("127.0.0.1", server.port)
    ran: list[str] = []
    try:
        with RedisSaver.from_conn_string(proxy.url, key_prefix="lgdretry") as saver:
            ledger = ToolLedger(saver)

            @ledger.durable(name="charge")
            def charge(what: str) -> str:
                ran.append(what)
                return f"charged {what}"

            def node(state: Calls) -> dict[str, list[str]]:
                first = charge("first")  # the task's ledger read, then this call
                proxy.cut("down", after=0)  # the next reply: the second call's intent
                return {"done": [first, charge("second")]}

            builder = StateGraph(Calls)
            builder.add_node("n", node)
            builder.add_edge(START, "n")
            builder.add_edge("n", END)
            graph = builder.compile(checkpointer=saver)
            out = graph.invoke({"done": []}, {"configurable": {"thread_id": "lost-reply"}})
        assert proxy.faults == 1, "the intent's reply was cut"
        assert out["done"] == ["charged first", "charged second"]
        assert ran == ["first", "second"]
    finally:
        proxy.close()
        server.stop()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_on_a_stale_replica_is_a_lost_server_not_a_lost_checkpoint(
    endpoint: Endpoint, mode: str
) -> None:
    """A put reaches the demoted primary (a kept connection) that never had its parent:
    its script would refuse with "the parent is gone" (``CheckpointLostError``) before
    its first write met READONLY. Seen in the failover soak as a checkpoint acknowledged
    and then "lost". A refusal is now made only where writes go: there, the server's own
    READONLY, ridden out on the primary the endpoint reaches now."""
    from langgraph.checkpoint.base import empty_checkpoint

    options: dict[str, Any] = {"key_prefix": "lgdstale2", "failover_timeout": 15.0}
    thread = f"replica-{mode}"
    root = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    meta = {"source": "loop", "step": 1}

    def checkpoint(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
        cp = empty_checkpoint()  # its id is the newest yet
        cp["channel_values"] = {"n": n}
        cp["channel_versions"] = {"n": f"{n:032}.0.5"}
        return cp, {"n": cp["channel_versions"]["n"]}

    def the_endpoint_moves_and_the_other_worker_puts(parent: dict[str, Any]) -> dict[str, Any]:
        endpoint.moves()
        with RedisSaver.from_conn_string(endpoint.new.url, **options) as other:
            cp, versions = checkpoint(2)
            return other.put(parent, cp, {"source": "loop", "step": 0}, versions)

    if mode == "sync":
        with RedisSaver.from_conn_string(endpoint.proxy.url, **options) as worker:
            cp, versions = checkpoint(1)
            first = worker.put(root, cp, {"source": "input", "step": -1}, versions)
            second = the_endpoint_moves_and_the_other_worker_puts(first)
            cp3, versions3 = checkpoint(3)
            third = worker.put(second, cp3, meta, versions3)  # on its kept connection
    else:

        async def run() -> dict[str, Any]:
            async with AsyncRedisSaver.from_conn_string(endpoint.proxy.url, **options) as worker:
                cp, versions = checkpoint(1)
                first = await worker.aput(root, cp, {"source": "input", "step": -1}, versions)
                second = the_endpoint_moves_and_the_other_worker_puts(first)
                cp3, versions3 = checkpoint(3)
                return await worker.aput(second, cp3, meta, versions3)  # kept connection

        third = asyncio.run(run())
    with RedisSaver.from_conn_string(endpoint.new.url, **options) as reader:
        newest = reader.get_tuple({"configurable": {"thread_id": thread}})
    assert newest is not None and newest.config == third
    assert newest.checkpoint["channel_values"] == {"n": 3}
