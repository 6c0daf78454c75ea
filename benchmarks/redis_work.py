"""Redis work per superstep, command by command: what each saver makes Redis do.

    python benchmarks/redis_work.py [--rounds 10] [--repeats 5] [--out FILE.json]

Each saver runs the benchmark's ReAct graph (one tool call per round, 1.5 KB per AI
message) and a graph whose model asks for three tool calls at once, on a Redis server
of this script's own (nothing else talks to it), one thread after another. Around each
thread it reads ``INFO commandstats`` (calls and microseconds per command, the commands
our scripts run inside them included), ``total_net_input_bytes`` and ``INFO cpu``
(user + system), and divides by the supersteps. Counts and bytes are deterministic;
microseconds and CPU are the median over ``--repeats`` threads, and move with the
machine: compare savers within one run. Savers: langgraph-durable (sync, async),
checkpoint-plainredis (sync, async, when installed), and the floor (InMemorySaver
plus one pipelined write of what it serialized per put and put_writes: the least a
Redis checkpointer sends).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from benchmarks.workloads.shared import RedisFloorSaver
from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.helpers import graphs
from tests.helpers.servers import start_server

PAYLOAD = 1500
IGNORED = ("cmdstat_info", "cmdstat_config")  # this script's own reads


WORKLOADS: dict[str, Callable[[int], Any]] = {
    "react": lambda rounds: graphs.react_graph(rounds=rounds, payload=PAYLOAD),
    "parallel tools": lambda rounds: graphs.parallel_tools_graph(rounds, payload=PAYLOAD),
}


def snapshot(admin: redis.Redis) -> dict[str, Any]:
    stats = admin.info("commandstats")
    cpu = admin.info("cpu")
    stats_ = admin.info("stats")
    return {
        "calls": Counter({k[8:]: v["calls"] for k, v in stats.items() if k not in IGNORED}),
        "usec": Counter({k[8:]: v["usec"] for k, v in stats.items() if k not in IGNORED}),
        "bytes": stats_["total_net_input_bytes"],
        # read events: about one per round trip (this script's own two INFO reads included)
        "reads": stats_.get("total_reads_processed", 0),
        "cpu": cpu["used_cpu_user"] + cpu["used_cpu_sys"],
    }


def opener(kind: str, url: str) -> Any:
    """A context manager yielding the saver ``kind`` on ``url``."""
    if kind == "durable":
        return RedisSaver.from_conn_string(url, key_prefix="lgdwork")
    if kind == "durable-async":
        return AsyncRedisSaver.from_conn_string(url, key_prefix="lgdwork")
    if kind.startswith("plainredis"):
        from contextlib import asynccontextmanager, contextmanager

        import langgraph_checkpoint_plainredis as plain

        if kind == "plainredis":

            @contextmanager
            def sync_plain() -> Any:
                saver = plain.RedisSaver(url=url, prefix="plainwork")
                yield saver
                saver.close()

            return sync_plain()

        @asynccontextmanager
        async def async_plain() -> Any:
            saver = plain.AsyncRedisSaver(client=redis.asyncio.Redis.from_url(url, protocol=2))
            yield saver
            await saver.aclose()

        return async_plain()
    assert kind == "floor"
    from contextlib import contextmanager

    @contextmanager
    def floor() -> Any:
        client = redis.Redis.from_url(url)
        yield RedisFloorSaver(client, "floorwork")
        client.close()

    return floor()


def measure(
    url: str, admin: redis.Redis, kinds: list[str], workload: str, rounds: int, n: int
) -> dict:
    """Each saver runs ``n`` threads (after one to warm up), the savers taking turns, so
    drift on a shared machine hits all of them alike."""
    builder = WORKLOADS[workload](rounds)
    supersteps = 2 * rounds + 1
    loop = asyncio.new_event_loop()
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with ExitStack() as stack:
        astack = AsyncExitStack()
        graphs_ = {}
        for kind in kinds:
            if kind.endswith("async"):
                saver = loop.run_until_complete(astack.enter_async_context(opener(kind, url)))
            else:
                saver = stack.enter_context(opener(kind, url))
            graphs_[kind] = builder.compile(checkpointer=saver)
        try:
            for i in range(n + 1):
                for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
                    config = {"configurable": {"thread_id": f"{workload}-{kind}-{i}"}}
                    before = snapshot(admin)
                    if kind.endswith("async"):
                        run = graphs_[kind].ainvoke(graphs.react_input(), config, durability="sync")
                        loop.run_until_complete(run)
                    else:
                        graphs_[kind].invoke(graphs.react_input(), config, durability="sync")
                    after = snapshot(admin)
                    if i:  # the first thread loads scripts and warms caches
                        runs[kind].append({k: after[k] - before[k] for k in after})
        finally:
            loop.run_until_complete(astack.aclose())
            loop.close()
    out = {}
    for kind, got in runs.items():
        last = got[-1]
        out[kind] = {
            "commands": {c: v / supersteps for c, v in sorted(last["calls"].items()) if v},
            "commands_total": sum(last["calls"].values()) / supersteps,
            "usec_by_command": {
                c: statistics.median(r["usec"][c] for r in got) / supersteps
                for c in sorted(last["calls"])
                if last["calls"][c]
            },
            "bytes": last["bytes"] / supersteps,
            "round_trips": (last["reads"] - 3) / supersteps,
            "command_usec": statistics.median(sum(r["usec"].values()) for r in got) / supersteps,
            "cpu_usec": statistics.median(r["cpu"] for r in got) * 1e6 / supersteps,
        }
    return out


def installed(savers: str) -> list[str]:
    """The comma-separated ``savers`` whose packages are installed."""
    kinds = savers.split(",")
    try:
        import langgraph_checkpoint_plainredis  # noqa: F401
    except ImportError:
        print("checkpoint-plainredis not installed: left out", file=sys.stderr)
        kinds = [k for k in kinds if not k.startswith("plainredis")]
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--savers", default="floor,durable,durable-async,plainredis,plainredis-async"
    )
    parser.add_argument("--out")
    args = parser.parse_args()
    kinds = installed(args.savers)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(tmp)
        admin = redis.Redis(port=server.port)
        try:
            for workload in WORKLOADS:
                results[workload] = measure(
                    server.url, admin, kinds, workload, args.rounds, args.repeats
                )
        finally:
            admin.close()
            server.stop()
    for workload, by_kind in results.items():
        print(f"\n## {workload}, per superstep ({2 * args.rounds + 1} supersteps)\n")
        print(
            "| saver | commands | round trips | bytes received | command µs | Redis CPU µs "
            "| commands by name |"
        )
        print("|---|---|---|---|---|---|---|")
        for kind, got in by_kind.items():
            names = ", ".join(f"{c} {v:.1f}" for c, v in got["commands"].items())
            print(
                f"| {kind} | {got['commands_total']:.1f} | {got['round_trips']:.1f} | "
                f"{got['bytes']:,.0f} | "
                f"{got['command_usec']:.0f} | {got['cpu_usec']:.0f} | {names} |"
            )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
