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
# Measured 2026-11-28, after the write scripts' compact layouts: ReAct 18.7-19.1 commands
# and 3,445-3,552 bytes per superstep, sync and async; three parallel tool calls
# 19.0-19.2 and 4,211-4,302 (fewer keys a call; before them, 3,770-3,925 and
# 4,411-4,681). Earlier: 18.5-19.1 and 18.7-19.3 commands (2026-11-27: 22.0-23.2
# and 23.5-26.0: since, the window of elements named without sending is read by plain
# commands ahead of the put's script instead of in its Lua, a new element up to 2 KB
# goes inside the put's script call instead of ahead of it with a check in it, the
# changed values go in one HSET and a task's index entries in one ZADD; a9a5730: 32.7
# and 4,306). Which of a task's write and the next put stores a new message first is
# LangGraph's race: the counts move by a few tenths, and by about one between sync and
# async. Bounds with room for that, no more.
BOUNDS = {"react": (20.0, 3900.0), "parallel tools": (20.5, 4700.0)}
WORKLOADS = {
    "react": lambda: graphs.react_graph(rounds=ROUNDS, payload=PAYLOAD),
    "parallel tools": lambda: graphs.parallel_tools_graph(ROUNDS, payload=PAYLOAD),
}


def measured(admin: redis.Redis) -> tuple[float, float]:
    stats = admin.info("commandstats")
    commands = sum(
        v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config")
    )
    received = admin.info("stats")["total_net_input_bytes"]
    return commands, received


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_redis_work_per_superstep_stays_within_its_bounds(
    tmp_path: Path, mode: str, workload: str
) -> None:
    server = start_server(str(tmp_path))
    admin = redis.Redis(port=server.port)
    builder = WORKLOADS[workload]()

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
    print(f"\n{workload}, {mode}: {commands:.1f} commands and {received:.0f} bytes per superstep")
    most_commands, most_bytes = BOUNDS[workload]
    assert commands <= most_commands, f"{commands:.1f} commands per superstep > {most_commands}"
    assert received <= most_bytes, f"{received:.0f} bytes per superstep > {most_bytes}"
