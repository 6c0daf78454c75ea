"""Side by side with LangGraph's InMemorySaver, in one run (a first cut of the issue-6
benchmark): graph overhead per superstep and micro operations on a 100-message thread.

    python benchmarks/compare.py            # embedded Redis, or REDIS_URL
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.tools.embedded import resolve_url
from tests.helpers import graphs


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def graph_overhead(saver: Any, rounds: int = 40, repeats: int = 5) -> float:
    """Seconds per superstep of a ReAct loop with durability='sync' (81 supersteps)."""
    graph = graphs.react_graph(rounds=rounds, payload=1500).compile(checkpointer=saver)
    times = []
    for _ in range(repeats):
        config = {"configurable": {"thread_id": f"g-{uuid.uuid4().hex[:8]}"}}
        t0 = time.perf_counter()
        graph.invoke(graphs.react_input(), config, durability="sync")
        times.append((time.perf_counter() - t0) / (2 * rounds + 1))
    return statistics.median(times)


def micro(saver: Any, n: int = 300) -> dict[str, float]:
    thread = f"m-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages = [
        (HumanMessage if i % 2 else AIMessage)(content="x" * 1500, id=str(i)) for i in range(100)
    ]
    version = None
    for _ in range(20):  # a thread of 20 checkpoints, 100 messages in the newest
        version = saver.get_next_version(version, None)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages}
        cp["channel_versions"] = {"messages": version}
        config = saver.put(config, cp, {"source": "loop", "step": 0}, {"messages": version})
    puts, writes, gets, lists = [], [], [], []
    latest = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        counter = saver.get_next_version(None, None)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages, "counter": i}
        cp["channel_versions"] = {"messages": version, "counter": counter}
        t0 = time.perf_counter()
        config = saver.put(config, cp, {"source": "loop", "step": i}, {"counter": counter})
        t1 = time.perf_counter()
        saver.put_writes(config, [("messages", messages[-1]), ("counter", i)], task_id=f"t{i}")
        t2 = time.perf_counter()
        saver.get_tuple(latest)
        t3 = time.perf_counter()
        list(saver.list(latest, limit=10))
        t4 = time.perf_counter()
        puts.append(t1 - t0)
        writes.append(t2 - t1)
        gets.append(t3 - t2)
        lists.append(t4 - t3)
    return {
        "put_us": median_us(puts),
        "put_writes_us": median_us(writes),
        "get_tuple_us": median_us(gets),
        "list10_us": median_us(lists),
    }


async def async_throughput(url: str, prefix: str, threads: int = 100, steps: int = 5) -> float:
    """Checkpoints per second with 100 concurrent graph runs on AsyncRedisSaver."""
    async with AsyncRedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        t0 = time.perf_counter()
        await asyncio.gather(
            *(
                graph.ainvoke(
                    {"value": i, "trail": []},
                    {"configurable": {"thread_id": f"a{i}"}},
                    durability="sync",
                )
                for i in range(threads)
            )
        )
        return threads * steps / (time.perf_counter() - t0)


def main() -> None:
    url = resolve_url(None)
    prefix = f"lgdbench-{uuid.uuid4().hex[:6]}"
    results: dict[str, dict[str, float]] = {}
    memory = InMemorySaver()
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as redis_saver:
        for name, saver in (("InMemorySaver", memory), ("RedisSaver", redis_saver)):
            graph_overhead(saver, rounds=5, repeats=1)  # warm-up
            results[name] = {"superstep_us": graph_overhead(saver) * 1e6, **micro(saver)}
        seq_t0 = time.perf_counter()
        graph = graphs.counter_graph().compile(checkpointer=redis_saver)
        for i in range(100):
            graph.invoke(
                {"value": i, "trail": []},
                {"configurable": {"thread_id": f"s{i}"}},
                durability="sync",
            )
        sequential = 100 * 5 / (time.perf_counter() - seq_t0)
        concurrent = asyncio.run(async_throughput(url, prefix))
        client = redis_saver.client
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.unlink(key)
    base = results["InMemorySaver"]
    print(f"{'':14s}" + "".join(f"{k:>16s}" for k in base))
    for name, row in results.items():
        print(f"{name:14s}" + "".join(f"{v:13.0f} µs" for v in row.values()))
    print(f"{'ratio':14s}" + "".join(f"{results['RedisSaver'][k] / base[k]:15.2f}x" for k in base))
    print(
        f"checkpoints/s: sequential sync {sequential:.0f}, 100 concurrent async {concurrent:.0f} "
        f"({concurrent / sequential:.1f}x)"
    )
    print(json.dumps({"results": results, "sequential_cps": sequential, "async_cps": concurrent}))


if __name__ == "__main__":
    main()
