"""Redis work per superstep, counted (deterministic, unlike timings): the commands Redis
ran (INFO commandstats, the ones our scripts run inside them included) and the bytes it
received, per superstep of the benchmark's ReAct workload, on a server of the test's own.
A change that adds Redis work fails here and says by how much; docs/reference/
performance.md has the table of what each command buys."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.helpers import graphs
from tests.helpers.servers import start_server

ROUNDS = 10  # tool rounds: 2 * ROUNDS + 1 supersteps
SUPERSTEPS = 2 * ROUNDS + 1
PAYLOAD = 1500  # the benchmark's characters per AI message
# Measured 2026-11-27: 32.7 commands per superstep, sync and async alike; bounds with room
# for one more command per superstep, no more.
MAX_COMMANDS = 34.0
MAX_BYTES = 4600.0  # bytes received per superstep (4,306 measured)


def measured(admin: redis.Redis) -> tuple[float, float]:
    stats = admin.info("commandstats")
    commands = sum(
        v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config")
    )
    received = admin.info("stats")["total_net_input_bytes"]
    return commands, received


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_redis_work_per_superstep_stays_within_its_bounds(tmp_path: Path, mode: str) -> None:
    server = start_server(str(tmp_path))
    admin = redis.Redis(port=server.port)
    builder = graphs.react_graph(rounds=ROUNDS, payload=PAYLOAD)

    def run(thread: str) -> tuple[float, float]:
        before = measured(admin)
        if mode == "sync":
            with RedisSaver.from_conn_string(server.url, key_prefix="lgdwork") as saver:
                graph = builder.compile(checkpointer=saver)
                after_setup = measured(admin)
                graph.invoke(
                    {"messages": [("user", "go")]}, {"configurable": {"thread_id": thread}}
                )
                done = measured(admin)
        else:

            async def arun() -> tuple[Any, Any]:
                async with AsyncRedisSaver.from_conn_string(
                    server.url, key_prefix="lgdwork"
                ) as saver:
                    graph = builder.compile(checkpointer=saver)
                    start = measured(admin)
                    config = {"configurable": {"thread_id": thread}}
                    await graph.ainvoke({"messages": [("user", "go")]}, config)
                    return start, measured(admin)

            after_setup, done = asyncio.run(arun())
        del before
        # INFO itself is a command and bytes: the two reads between are left out above
        commands = (done[0] - after_setup[0]) / SUPERSTEPS
        received = (done[1] - after_setup[1]) / SUPERSTEPS
        return commands, received

    try:
        run("warm-up")  # a first thread: scripts loaded, nothing cached yet
        commands, received = run("measured")
    finally:
        admin.close()
        server.stop()
    print(f"\n{mode}: {commands:.1f} commands and {received:.0f} bytes per superstep")
    assert commands <= MAX_COMMANDS, f"{commands:.1f} commands per superstep > {MAX_COMMANDS}"
    assert received <= MAX_BYTES, f"{received:.0f} bytes per superstep > {MAX_BYTES}"
