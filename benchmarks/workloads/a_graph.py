"""(a) A ReAct graph, durability="sync": time and checkpointer overhead per superstep."""

from __future__ import annotations

import functools
import statistics
from typing import Any

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig

from benchmarks.harness import (
    OVERHEAD_GUARD,
    PAYLOAD,
    REDIS_FAMILIES,
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
from benchmarks.workloads.shared import (
    ASYNC_REDIS_FLOOR_LABEL,
    REDIS_FLOOR_LABEL,
    AsyncRedisFloorSaver,
    RedisFloorSaver,
    floor_key,
    invoke_react,
)
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
    if any(h.family == "durable" and h.mode == "async" for h in b.handles.values()):
        aclient = redis.asyncio.Redis.from_url(b.redis_url)
        b.stack.callback(lambda: b.run(aclient.aclose()))
        afloor_saver = AsyncRedisFloorSaver(aclient, b.prefix("redis-floor-async"))
        afloor = Handle(
            "redis-floor-async", ASYNC_REDIS_FLOOR_LABEL, "redis-floor", "async", afloor_saver
        )
        runners[afloor.key] = (afloor, builder.compile(checkpointer=afloor_saver))
    samples: dict[str, list[float]] = {k: [] for k in runners}
    cpu: dict[str, list[float]] = {k: [] for k in runners}  # Redis server µs per superstep
    memory: dict[str, int] = {}  # Redis MEMORY USAGE of one finished thread
    admin = redis.Redis.from_url(b.redis_url)
    b.stack.callback(admin.close)
    keys = list(runners)
    for r in range(repeats + 1):  # round 0 warms up every saver and is discarded
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            h, graph = runners[key]
            thread_id = b.thread(key, "graph")
            used = redis_cpu_s(admin)
            d = run_graph(b, h, graph, thread_id)
            if r:
                samples[key].append(d / supersteps)
                if h.family in REDIS_FAMILIES or h.family == "redis-floor":
                    cpu[key].append((redis_cpu_s(admin) - used) * 1e6 / supersteps)
            if r == 1 and h.thread_patterns is not None:
                memory[key] = thread_memory(admin, h.thread_patterns(thread_id))
    guard = guard_trios(b, runners, supersteps, trios=GUARD_TRIOS if repeats > 2 else 3)
    prose = prose_memory(b, rounds, admin)
    per_step = {k: median_us(v) for k, v in samples.items()}
    cpu_per_step = {k: median_us([x / 1e6 for x in v]) for k, v in cpu.items() if v}
    rows: dict[str, Any] = {}
    for key, (h, _) in runners.items():
        if h.saver is None:
            continue
        base = per_step[f"none-{h.mode}"]
        mem = per_step.get(floor_key(h))
        overhead = per_step[key] - base
        mem_overhead = mem - base if mem is not None else None
        # each API against the floor through the same API (the async one costs more)
        floor_key_ = "redis-floor" if h.mode == "sync" else "redis-floor-async"
        redis_floor = per_step.get(floor_key_)
        floor_overhead = redis_floor - base if redis_floor else None
        server = cpu_per_step.get(key)
        floor_cpu = cpu_per_step.get(floor_key_)
        rows[key] = {
            "redis_cpu_us": server,
            "redis_cpu_vs_floor": server / floor_cpu if server and floor_cpu else None,
            "supersteps_per_redis_core": 1e6 / server if server else None,
            "thread_memory_bytes": memory.get(key),
            **prose.get(key, {}),
            "superstep_us": per_step[key],
            "overhead_us": overhead,
            "superstep_ratio": per_step[key] / mem if mem else None,
            # a difference of two noisy medians: no ratio unless InMemorySaver's is > 0
            "overhead_ratio": overhead / mem_overhead
            if mem_overhead and mem_overhead > 0
            else None,
            # the table's figure: medians of rounds with every other saver run in between
            "table_overhead_vs_redis_floor": overhead / floor_overhead
            if floor_overhead and floor_overhead > 0
            else None,
            # the guard's: trios run back to back (guard_trios), None for other savers
            "overhead_vs_redis_floor": guard.get(key, {}).get("ratio"),
            "guard_trios": guard.get(key),
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


def run_graph(b: Bench, h: Handle, graph: Any, thread_id: str) -> float:
    """Seconds one run of the ReAct graph takes on a thread of its own."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 1000}
    steps: list[Step] = [("invoke", functools.partial(invoke_react, h, graph, config))]
    return run_steps(b, h, steps, {})["invoke"]


GUARD_TRIOS = 21  # (no checkpointer, the floor, ours) back to back, per API


def guard_trios(
    b: Bench, runners: dict[str, tuple[Handle, Any]], supersteps: int, trios: int
) -> dict[str, dict[str, Any]]:
    """The superstep guard's figure: per API, ``trios`` trios of runs (no checkpointer,
    the Redis floor, ours) back to back, each trio in a rotating order, so the three
    runs of a trio see the same machine (in the table's rounds every other saver runs
    between them, and this machine's speed drifts by a tenth within seconds). The
    ratio is of the medians, (ours - none) / (floor - none); the quartiles of the
    trios' own ratios show how far one trio moves."""
    out: dict[str, dict[str, Any]] = {}
    for mode, ours, floor in (
        ("sync", "durable", "redis-floor"),
        ("async", "durable-async", "redis-floor-async"),
    ):
        keys = [f"none-{mode}", floor, ours]
        if not all(k in runners for k in keys):
            continue
        samples: dict[str, list[float]] = {k: [] for k in keys}
        for t in range(trios + 1):  # trio 0 warms up and is discarded
            for key in keys[t % 3 :] + keys[: t % 3]:
                h, graph = runners[key]
                d = run_graph(b, h, graph, b.thread(key, f"guard-{t}"))
                if t:
                    samples[key].append(d / supersteps * 1e6)
        out[ours] = trio_figures(*(samples[k] for k in keys))
    return out


def trio_figures(none: list[float], floor: list[float], ours: list[float]) -> dict[str, Any]:
    """The guard's figures from trios' µs per superstep (the i-th of each list one
    trio): the overhead ratio of the medians, (ours - none) / (floor - none), None where
    the floor costs nothing measurable; and the quartiles of the trios' own ratios."""
    none_, floor_, ours_ = (statistics.median(v) for v in (none, floor, ours))
    each = [(o - n) / (f - n) for n, f, o in zip(none, floor, ours) if f > n]
    return {
        "trios": len(none),
        "none_us": none_,
        "floor_us": floor_,
        "ours_us": ours_,
        "ratio": (ours_ - none_) / (floor_ - none_) if floor_ > none_ else None,
        "trio_quartiles": statistics.quantiles(each, n=4) if len(each) > 1 else None,
    }


PROSE_PAYLOAD = 3000  # characters of prose per model answer: ~120 KB of text at 40 rounds


def prose_memory(b: Bench, rounds: int, admin: redis.Redis) -> dict[str, dict[str, Any]]:
    """Redis MEMORY USAGE of one finished ReAct thread whose model answers are real
    prose (text that compresses as model output does), against its final message text."""
    builder = graphs.react_graph(rounds=rounds, payload=PROSE_PAYLOAD, realistic=True)
    out: dict[str, dict[str, Any]] = {}
    for key, h in b.handles.items():
        if h.thread_patterns is None or h.family not in REDIS_FAMILIES:
            continue
        thread_id = b.thread(key, "prose")
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 1000}
        state = b.do(h.invoke(builder.compile(checkpointer=h.saver), graphs.react_input(), config))
        text = sum(len(str(m.content)) for m in state["messages"])
        memory = thread_memory(admin, h.thread_patterns(thread_id))
        out[key] = {
            "prose_text_chars": text,
            "prose_memory_bytes": memory,
            "prose_memory_vs_text": memory / text,
        }
    return out


def redis_cpu_s(client: redis.Redis) -> float:
    """Seconds of CPU the Redis server has used (INFO cpu: user + system, every thread)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def thread_memory(client: redis.Redis, patterns: list[str]) -> int:
    """Redis MEMORY USAGE of every key of one thread."""
    keys = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
    return sum(client.memory_usage(k, samples=0) or 0 for k in keys)


def _floor_label(key: str) -> str | None:
    return {"redis-floor": REDIS_FLOOR_LABEL, "redis-floor-async": ASYNC_REDIS_FLOOR_LABEL}.get(key)


def render_graph(g: dict[str, Any]) -> list[str]:
    base = ", ".join(f"{fu(v)} µs ({k} API)" for k, v in g["no_checkpointer_us"].items())
    rows = []
    for k, v in g["savers"].items():
        ours = k in SAVERS and SAVERS[k][1] == "durable"
        rows.append(
            [
                _floor_label(k) or label(k),
                fu(v["superstep_us"]),
                fx(v["superstep_ratio"]),
                fu(v["overhead_us"]),
                fx(v["overhead_ratio"]),
                fx(v.get("table_overhead_vs_redis_floor")) if ours else "",
                fx(v.get("overhead_vs_redis_floor")) if ours else "",
                mark(v.get("overhead_vs_redis_floor"), OVERHEAD_GUARD) if ours else "",
            ]
        )
    trios = [
        f"{label(k)}: {fu(t['ours_us'])} µs a superstep against the floor's "
        f"{fu(t['floor_us'])} and {fu(t['none_us'])} without a checkpointer, "
        f"{fx(t['ratio'])} (one trio's own ratio, first to third quartile: "
        f"{fx((t['trio_quartiles'] or [None])[0])} to {fx((t['trio_quartiles'] or [None])[-1])})"
        for k, v in g["savers"].items()
        if (t := v.get("guard_trios"))
    ]
    server_rows = [
        [
            _floor_label(k) or label(k),
            fu(v["redis_cpu_us"]),
            fx(v["redis_cpu_vs_floor"]),
            fu(v["supersteps_per_redis_core"]),
            fu(v["thread_memory_bytes"]),
            fu(v.get("prose_memory_bytes")),
            fx(v.get("prose_memory_vs_text")),
        ]
        for k, v in g["savers"].items()
        if v.get("redis_cpu_us")
    ]
    return section(
        f"(a) ReAct graph, {g['rounds']} rounds ({g['supersteps']} supersteps), "
        f'durability="sync", median of {g["repeats"]}',
        f"Per superstep without a checkpointer: {base}. Overhead = time per superstep minus "
        "that; × InMemory compares it with InMemorySaver's overhead. "
        f"{REDIS_FLOOR_LABEL} is InMemorySaver plus one pipelined Redis write of the "
        "serialized new data per put and per put_writes, nothing else: what talking to "
        "Redis at all costs on this machine (× floor compares our overhead with its); "
        f"{ASYNC_REDIS_FLOOR_LABEL} is the same through the async API (InMemorySaver's "
        "aput and aput_writes, an asyncio client), what the async saver is compared with.",
        "",
        md_table(
            [
                "saver",
                "µs/superstep",
                "× InMemory",
                "overhead µs",
                "overhead × InMemory",
                "overhead × Redis floor",
                "guard's figure (trios)",
                f"guard ≤{OVERHEAD_GUARD}× Redis floor",
            ],
            rows,
        ),
        "",
        "The guard's figure is measured apart, after the table's rounds: trios of runs "
        "(no checkpointer, the Redis floor, ours) back to back through one API, each trio "
        "in a rotating order, medians of each (the table's figure is the medians of "
        "rounds in which every other saver runs between the three, seconds apart, while "
        "this machine's speed drifts): "
        + ("; ".join(trios) if trios else "not measured")
        + ".",
        "",
        "What the Redis server spends: CPU per superstep from `INFO cpu` (user + system) "
        "around each run, supersteps one Redis core sustains at that rate, and `MEMORY "
        "USAGE` of one finished thread: the thread above, and the same graph whose model "
        f"answers {PROSE_PAYLOAD:,} characters of real prose (the ÷ text column divides by "
        "the final message text; target for ours ≤3×).",
        "",
        md_table(
            [
                "saver",
                "Redis CPU µs/superstep",
                "× Redis floor",
                "supersteps per Redis core",
                "thread memory bytes",
                "prose thread memory bytes",
                "÷ text",
            ],
            server_rows,
        ),
    )
