"""Load: many concurrent threads on one Redis through AsyncRedisSaver.

    python benchmarks/load.py                       # 1000 threads x 20 steps
    python benchmarks/load.py --threads 200 --steps 5 --json

Each thread is a real compiled graph that loops ``steps`` supersteps, appending a
~500-byte message per step (durability="sync": every checkpoint is written before the
next step). Reports throughput, step latency, errors, and what Redis holds afterwards
with ``keep_last`` (retention) and ``ttl`` (expiry) set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import redis
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph_durable import AsyncRedisSaver
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.tools.embedded import resolve_url


class LoopState(TypedDict):
    step: int
    log: Annotated[list[str], operator.add]


def loop_graph(steps: int) -> StateGraph:
    def work(state: LoopState) -> dict[str, Any]:
        return {"step": state["step"] + 1, "log": [f"step {state['step']} " + "x" * 500]}

    builder = StateGraph(LoopState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", lambda s: END if s["step"] >= steps else "work")
    return builder


async def run_load(
    url: str, threads: int, steps: int, keep_last: int, ttl: int, prefix: str
) -> dict[str, Any]:
    errors: list[str] = []
    latencies: list[float] = []
    async with AsyncRedisSaver.from_conn_string(
        url, key_prefix=prefix, keep_last=keep_last, ttl=ttl, max_connections=200
    ) as saver:
        graph = loop_graph(steps).compile(checkpointer=saver)

        async def one(i: int) -> None:
            config = {"configurable": {"thread_id": f"load-{i}"}, "recursion_limit": steps + 5}
            last = time.perf_counter()
            try:
                async for _ in graph.astream(
                    {"step": 0, "log": []}, config, durability="sync", stream_mode="updates"
                ):
                    now = time.perf_counter()
                    latencies.append(now - last)
                    last = now
                state = await graph.aget_state(config)
                if state.values["step"] != steps or len(state.values["log"]) != steps:
                    errors.append(f"thread {i}: wrong final state {state.values['step']}")
            except Exception as exc:  # noqa: BLE001 - counted and reported, not hidden
                errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(threads)))
        elapsed = time.perf_counter() - started

    client = redis.Redis.from_url(url)
    try:
        keys, memory, ttls, checkpoints = 0, 0, [], []
        marker = KeySchema(prefix).run_index_marker().encode()  # the prefix's, no ttl
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            keys += 1
            memory += client.memory_usage(key, samples=0) or 0
            if key != marker:
                ttls.append(client.ttl(key))
            if key.endswith(b":cps"):
                checkpoints.append(client.zcard(key))
        used_memory = client.info("memory")["used_memory"]
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.unlink(key)
    finally:
        client.close()
    latencies.sort()
    return {
        "threads": threads,
        "steps": steps,
        "keep_last": keep_last,
        "ttl_s": ttl,
        "errors": len(errors),
        "first_errors": errors[:5],
        "seconds": round(elapsed, 2),
        "supersteps_per_s": round(threads * steps / elapsed),
        "step_latency_ms": {
            "p50": round(statistics.median(latencies) * 1000, 1),
            "p99": round(latencies[int(len(latencies) * 0.99)] * 1000, 1),
        },
        "keys": keys,
        "bytes_held": memory,
        "bytes_per_thread": round(memory / max(threads, 1)),
        "max_checkpoints_per_thread": max(checkpoints, default=0),
        "keys_without_ttl": sum(1 for t in ttls if t < 0),
        "redis_used_memory": used_memory,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--keep-last", type=int, default=5)
    parser.add_argument("--ttl", type=int, default=3600)
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    url = resolve_url(None)
    prefix = f"lgdload-{uuid.uuid4().hex[:6]}"
    result = asyncio.run(run_load(url, args.threads, args.steps, args.keep_last, args.ttl, prefix))
    if args.json:
        print(json.dumps(result))
        return
    for name, value in result.items():
        print(f"{name:28s} {value}")


if __name__ == "__main__":
    main()
