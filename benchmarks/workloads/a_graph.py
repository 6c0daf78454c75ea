"""(a) A ReAct graph, durability="sync": time and checkpointer overhead per superstep."""

from __future__ import annotations

import functools
from typing import Any

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig

from benchmarks.harness import (
    PAYLOAD,
    SAVERS,
    Bench,
    Handle,
    Step,
    fu,
    fx,
    label,
    mark,
    md_table,
    median_us,
    run_steps,
    section,
)
from benchmarks.workloads.shared import REDIS_FLOOR_LABEL, RedisFloorSaver, floor_key, invoke_react
from tests.helpers import graphs


def workload_graph(b: Bench, rounds: int, repeats: int) -> dict[str, Any]:
    """µs per superstep of the ReAct graph, with each saver and with none (the baseline
    for the checkpointer's overhead); every repeat runs all of them in turn."""
    supersteps = 2 * rounds + 1
    builder = graphs.react_graph(rounds=rounds, payload=PAYLOAD)
    runners: dict[str, tuple[Handle, Any]] = {}
    for mode in ("sync", "async"):
        if any(h.mode == mode for h in b.handles.values()):
            none = Handle(f"none-{mode}", f"no checkpointer ({mode})", "none", mode, None)
            runners[none.key] = (none, builder.compile())
    for key, h in b.handles.items():
        runners[key] = (h, builder.compile(checkpointer=h.saver))
    if "durable" in b.handles:  # the reference for what any Redis saver costs here
        floor_saver = RedisFloorSaver(redis.Redis.from_url(b.redis_url), b.prefix("redis-floor"))
        b.stack.callback(floor_saver.client.close)
        floor = Handle("redis-floor", REDIS_FLOOR_LABEL, "redis-floor", "sync", floor_saver)
        runners[floor.key] = (floor, builder.compile(checkpointer=floor_saver))
    samples: dict[str, list[float]] = {k: [] for k in runners}
    keys = list(runners)
    for r in range(repeats + 1):  # round 0 warms up every saver and is discarded
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            h, graph = runners[key]
            config: RunnableConfig = {
                "configurable": {"thread_id": b.thread(key, "graph")},
                "recursion_limit": 1000,
            }
            steps: list[Step] = [("invoke", functools.partial(invoke_react, h, graph, config))]
            d = run_steps(b, h, steps, {})["invoke"]
            if r:
                samples[key].append(d / supersteps)
    per_step = {k: median_us(v) for k, v in samples.items()}
    rows: dict[str, Any] = {}
    redis_floor = per_step.get("redis-floor")
    for key, (h, _) in runners.items():
        if h.saver is None:
            continue
        base = per_step[f"none-{h.mode}"]
        mem = per_step.get(floor_key(h))
        overhead = per_step[key] - base
        mem_overhead = mem - base if mem is not None else None
        floor_overhead = redis_floor - per_step["none-sync"] if redis_floor else None
        rows[key] = {
            "superstep_us": per_step[key],
            "overhead_us": overhead,
            "superstep_ratio": per_step[key] / mem if mem else None,
            # a difference of two noisy medians: no ratio unless InMemorySaver's is > 0
            "overhead_ratio": overhead / mem_overhead
            if mem_overhead and mem_overhead > 0
            else None,
            "overhead_vs_redis_floor": overhead / floor_overhead
            if floor_overhead and floor_overhead > 0
            else None,
        }
    return {
        "rounds": rounds,
        "supersteps": supersteps,
        "repeats": repeats,
        "no_checkpointer_us": {
            m: per_step[f"none-{m}"] for m in ("sync", "async") if f"none-{m}" in per_step
        },
        "savers": rows,
    }


def render_graph(g: dict[str, Any]) -> list[str]:
    base = ", ".join(f"{fu(v)} µs ({k} API)" for k, v in g["no_checkpointer_us"].items())
    rows = []
    for k, v in g["savers"].items():
        ours = k in SAVERS and SAVERS[k][1] == "durable"
        rows.append(
            [
                REDIS_FLOOR_LABEL if k == "redis-floor" else label(k),
                fu(v["superstep_us"]),
                fx(v["superstep_ratio"]),
                fu(v["overhead_us"]),
                fx(v["overhead_ratio"]),
                fx(v.get("overhead_vs_redis_floor")) if ours and k == "durable" else "",
                mark(v["overhead_ratio"], 1.25) if ours else "",
            ]
        )
    return section(
        f"(a) ReAct graph, {g['rounds']} rounds ({g['supersteps']} supersteps), "
        f'durability="sync", median of {g["repeats"]}',
        f"Per superstep without a checkpointer: {base}. Overhead = time per superstep minus "
        "that; × InMemory compares it with InMemorySaver's overhead. "
        f"{REDIS_FLOOR_LABEL} is InMemorySaver plus one pipelined Redis write of the "
        "serialized new data per put and per put_writes, nothing else: what talking to "
        "Redis at all costs on this machine (× floor compares our overhead with its).",
        "",
        md_table(
            [
                "saver",
                "µs/superstep",
                "× InMemory",
                "overhead µs",
                "overhead × InMemory",
                "overhead × Redis floor",
                "target ≤1.25× InMemory",
            ],
            rows,
        ),
    )
