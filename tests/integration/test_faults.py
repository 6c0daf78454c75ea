"""Connection faults between the saver and Redis, through a real TCP proxy: commands cut
in the middle, replies lost or cut, replies held past the socket timeout. Every operation
completes exactly once (redis-py retries; every write is idempotent) or raises, and what
Redis holds is then the whole write or none of it."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from langgraph_durable import AsyncRedisSaver, RedisSaver, ToolLedger
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.kill_harness import check_world, final_messages, reference_messages
from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, agent_graph, answer

FAULTS = {
    "command cut midway": ("cut", "up", 300),
    "reply lost": ("cut", "down", 0),
    "reply cut midway": ("cut", "down", 2),
    "reply past the timeout": ("stall", "down", 0.6),
}


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultProxy]:
    target = urlparse(redis_url)
    p = FaultProxy(target.hostname or "127.0.0.1", target.port or 6379)
    yield p
    p.close()


@pytest.fixture
def direct(redis_url: str, key_prefix: str) -> Iterator[RedisSaver]:
    """The truth: a saver that bypasses the proxy."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as s:
        yield s


def arm(proxy: FaultProxy, fault: str) -> None:
    kind, direction, amount = FAULTS[fault]
    if kind == "cut":
        proxy.cut(direction, after=int(amount))
    else:
        proxy.stall(direction, float(amount))


def checkpoint(values: dict[str, Any], saver: RedisSaver) -> tuple[Any, dict[str, str]]:
    cp = empty_checkpoint()
    versions = {k: saver.get_next_version(None, None) for k in values}
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp, versions


async def _await(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_write_through_a_fault_lands_exactly_once(
    proxy: FaultProxy, direct: RedisSaver, key_prefix: str, fault: str, mode: str
) -> None:
    config = {"configurable": {"thread_id": "f", "checkpoint_ns": ""}}
    first, versions = checkpoint({"messages": ["x" * 5000] * 20}, direct)
    base = direct.put(config, first, {"source": "input", "step": -1}, versions)
    second, new_versions = checkpoint({"messages": ["y" * 5000] * 20, "n": 1}, direct)
    writes = [("n", 2), ("messages", "z"), ("__error__", "boom")]
    url = proxy.url + "?socket_timeout=0.3"

    async def work(saver: Any) -> Any:
        aio = isinstance(saver, AsyncRedisSaver)
        arm(proxy, fault)
        put = saver.aput if aio else saver.put
        stored = await _await(put(base, second, {"source": "loop", "step": 0}, new_versions))
        assert proxy.faults == 1
        arm(proxy, fault)
        put_writes = saver.aput_writes if aio else saver.put_writes
        await _await(put_writes(stored, writes, task_id="task-1"))
        assert proxy.faults == 2
        return stored

    async def run() -> Any:
        if mode == "sync":
            with RedisSaver.from_conn_string(url, key_prefix=key_prefix) as saver:
                return await work(saver)
        async with AsyncRedisSaver.from_conn_string(url, key_prefix=key_prefix) as saver:
            return await work(saver)

    stored = asyncio.run(run())  # the sync saver's calls simply block the loop
    assert next(t.config for t in direct.list(config)) == stored
    assert len(list(direct.list(config))) == 2
    latest = direct.get_tuple(config)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"messages": ["y" * 5000] * 20, "n": 1}
    assert sorted(latest.pending_writes, key=repr) == sorted(
        (("task-1", ch, v) for ch, v in writes), key=repr
    ), "each pending write stored once"
    assert direct.verify("f").ok


@pytest.mark.parametrize("direction", ["up", "down"])
def test_without_retries_a_fault_raises_and_the_write_is_whole_or_absent(
    proxy: FaultProxy, direct: RedisSaver, redis_url: str, key_prefix: str, direction: str
) -> None:
    config = {"configurable": {"thread_id": "n", "checkpoint_ns": ""}}
    # values that do not compress below INLINE_VALUE_MAX: they go ahead of the script
    big_x, big_y = secrets.token_hex(10000), secrets.token_hex(10000)
    first, versions = checkpoint({"a": big_x}, direct)
    base = direct.put(config, first, {"source": "input", "step": -1}, versions)
    second, new_versions = checkpoint({"a": big_y}, direct)
    client = redis.Redis(port=proxy.port, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))
    saver = RedisSaver(client, key_prefix=key_prefix, failover_timeout=0)  # no retries at all
    client.ping()  # connected: the fault hits the put, not the handshake
    # Down: the cut falls inside the script's reply, after the value's HSETNX reply
    # (":1\r\n"): Redis may send that one alone, before it has read the script call.
    proxy.cut(direction, after=300 if direction == "up" else len(b":1\r\n"))
    with pytest.raises(redis.ConnectionError):
        saver.put(base, second, {"source": "loop", "step": 0}, new_versions)
    client.close()
    stored = list(direct.list(config))
    if direction == "up":  # cut before Redis had the whole command: nothing of it ran
        assert len(stored) == 1
    else:  # it ran, only the reply was lost: all of it is there
        assert len(stored) == 2
        assert stored[0].checkpoint["channel_values"] == {"a": big_y}
    assert direct.verify("n").ok


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("direction", ["up", "down"])
def test_a_ledger_agent_run_through_random_cuts_repeats_no_effect(
    proxy: FaultProxy, redis_url: str, key_prefix: str, tmp_path: Path, direction: str, mode: str
) -> None:
    """Leases, checkpoints, pending writes and ledger entries, with connections cut at
    random points all through the run (a burst of bytes every 3 to 6, sparing a new
    connection's handshake and first command, so a retry always gets through)."""
    effects = Effects(str(tmp_path / "effects"))
    config = {"configurable": {"thread_id": "agent"}}

    def next_input(state: Any) -> Any:
        if not state.values:
            return START_INPUT
        if state.interrupts:
            return Command(resume={i.id: answer(i.value, effects) for i in state.interrupts})
        return None if (state.next or state.tasks) else "done"

    proxy.cut_every(direction, 3)
    if mode == "sync":
        with RedisSaver.from_conn_string(proxy.url, key_prefix=key_prefix) as saver:
            graph = agent_graph(ToolLedger(saver, policies=POLICIES), effects).compile(
                checkpointer=saver
            )
            with saver.lease("agent"):
                while (inp := next_input(graph.get_state(config))) != "done":
                    graph.invoke(inp, config)
    else:

        async def main() -> None:
            async with AsyncRedisSaver.from_conn_string(proxy.url, key_prefix=key_prefix) as s:
                graph = agent_graph(ToolLedger(s, policies=POLICIES), effects).compile(
                    checkpointer=s
                )
                async with s.alease("agent"):
                    while (inp := next_input(await graph.aget_state(config))) != "done":
                        await graph.ainvoke(inp, config)

        asyncio.run(main())
    proxy.disarm()
    assert proxy.faults >= 5, "the run went through several cuts"
    check_world(
        effects, final_messages(redis_url, key_prefix, "agent"), reference_messages(redis_url)
    )


@pytest.mark.parametrize(("direction", "after"), [("up", 20), ("down", 0), ("down", 50)])
def test_a_pipeline_through_a_fault_is_resent_whole(
    proxy: FaultProxy, direct: RedisSaver, key_prefix: str, direction: str, after: int
) -> None:
    """copy_thread reads the source in one pipeline, then writes the copy in one script."""
    config = {"configurable": {"thread_id": "src", "checkpoint_ns": ""}}
    for i in range(3):
        cp, versions = checkpoint({"v": "x" * 1000 * (i + 1)}, direct)
        config = direct.put(config, cp, {"source": "loop", "step": i}, versions)
        direct.put_writes(config, [("v", i)], task_id=f"t{i}")
    with RedisSaver.from_conn_string(proxy.url, key_prefix=key_prefix) as saver:
        saver.client.ping()
        proxy.cut(direction, after=after)
        saver.copy_thread("src", "dst")
        assert proxy.faults == 1
        proxy.cut(direction, after=after)
        assert saver.verify("dst").ok

    def history(thread: str) -> list[Any]:
        return [
            (t.checkpoint["channel_values"], t.metadata, t.pending_writes)
            for t in direct.list({"configurable": {"thread_id": thread}})
        ]

    assert history("dst") == history("src") and len(history("dst")) == 3
