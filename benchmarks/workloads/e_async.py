"""(e) Concurrent graph runs on an async saver against the same runs sequentially, also
through a latency proxy."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig

from benchmarks.harness import Bench, Handle, fu, fx, md_table, median_us, section
from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.helpers import graphs


def workload_async(b: Bench, threads: int, repeats: int) -> dict[str, Any]:
    """Checkpoints/s of ``threads`` counter-graph runs: concurrently (asyncio.gather) on
    the async saver, and one after another on the sync saver of the same package."""
    rows: dict[str, Any] = {}
    for family in ("durable", "memory", "sqlite", "postgres", "valkey", "plainredis"):
        sync_h, async_h = b.handles.get(family), b.handles.get(f"{family}-async")
        if sync_h is not None and async_h is not None:
            try:
                rows[family] = async_pair(b, sync_h, async_h, threads, repeats)
            except Exception as exc:  # noqa: BLE001  (one pair failing must not hide the rest)
                rows[family] = {"sync": sync_h.label, "async": async_h.label, "error": repr(exc)}
                print(f"    {async_h.label}: failed: {exc!r}", flush=True)
    if "durable" in b.handles and "durable-async" in b.handles:
        for delay_ms in LATENCY_MS:
            try:
                rows[f"durable+{delay_ms}ms"] = durable_pair_over_latency(
                    b, delay_ms, threads, repeats
                )
            except Exception as exc:  # noqa: BLE001
                rows[f"durable+{delay_ms}ms"] = {
                    "sync": f"RedisSaver +{delay_ms} ms",
                    "async": f"AsyncRedisSaver +{delay_ms} ms",
                    "error": repr(exc),
                }
                print(f"    over {delay_ms} ms latency: failed: {exc!r}", flush=True)
    return {"threads": threads, "repeats": repeats, "pairs": rows}


LATENCY_PROXY = Path(__file__).resolve().parent.parent / "latency_proxy.py"


LATENCY_MS = (1.0, 2.0, 5.0)  # added per round trip by benchmarks/latency_proxy.py


def durable_pair_over_latency(b: Bench, delay_ms: float, threads: int, repeats: int) -> dict:
    """The durable pair again, talking to Redis through a proxy that holds every burst
    back (Redis in another zone, not on loopback), where concurrency has waits to fill."""
    proxy = subprocess.Popen(
        [sys.executable, str(LATENCY_PROXY), *redis_address(b), str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        url = f"redis://127.0.0.1:{int(proxy.stdout.readline())}/0"
        ping = redis.Redis.from_url(url)
        rtt = []
        for _ in range(50):
            t0 = time.perf_counter()
            ping.ping()
            rtt.append(time.perf_counter() - t0)
        ping.close()
        prefix = b.prefix(f"latency{delay_ms:g}")
        with ExitStack() as stack:
            sync_saver = stack.enter_context(RedisSaver.from_conn_string(url, key_prefix=prefix))
            async_cm = AsyncRedisSaver.from_conn_string(url, key_prefix=prefix)
            async_saver = b.run(async_cm.__aenter__())
            stack.callback(lambda: b.run(async_cm.__aexit__(None, None, None)))
            sync_h = Handle(
                "durable", f"RedisSaver, +{delay_ms:g} ms", "durable", "sync", sync_saver
            )
            async_h = Handle(
                "durable-async",
                f"AsyncRedisSaver, +{delay_ms:g} ms",
                "durable",
                "async",
                async_saver,
            )
            row = async_pair(b, sync_h, async_h, threads, repeats)
        row["round_trip_us"] = median_us(rtt)
        return row
    finally:
        proxy.kill()
        proxy.wait()


def redis_address(b: Bench) -> tuple[str, str]:
    kwargs = b.redis.connection_pool.connection_kwargs
    return str(kwargs.get("host", "127.0.0.1")), str(kwargs.get("port", 6379))


def async_pair(b: Bench, sync_h: Handle, async_h: Handle, threads: int, repeats: int) -> dict:
    builder = graphs.counter_graph()
    sync_graph = builder.compile(checkpointer=sync_h.saver)
    async_graph = builder.compile(checkpointer=async_h.saver)

    def runs(h: Handle, r: int) -> list[tuple[dict[str, Any], RunnableConfig]]:
        return [
            ({"value": i, "trail": []}, {"configurable": {"thread_id": b.thread(h, f"e{r}-{i}")}})
            for i in range(threads)
        ]

    async def concurrent(batch: list[tuple[dict[str, Any], RunnableConfig]]) -> float:
        t0 = time.perf_counter()
        # return_exceptions: let every run finish before raising, leaving no task behind
        done = await asyncio.gather(
            *(async_graph.ainvoke(x, c, durability="sync") for x, c in batch),
            return_exceptions=True,
        )
        elapsed = time.perf_counter() - t0
        for result in done:
            if isinstance(result, BaseException):
                raise result
        return elapsed

    seq_times: list[float] = []
    conc_times: list[float] = []
    for r in range(repeats):
        batch = runs(sync_h, r)
        t0 = time.perf_counter()
        for x, c in batch:
            sync_graph.invoke(x, c, durability="sync")
        seq_times.append(time.perf_counter() - t0)
        conc_times.append(b.run(concurrent(runs(async_h, r))))
    per_run = len(list(sync_h.saver.list(batch[0][1])))  # checkpoints one run writes
    seq_cps = threads * per_run / statistics.median(seq_times)
    conc_cps = threads * per_run / statistics.median(conc_times)
    return {
        "sync": sync_h.label,
        "async": async_h.label,
        "checkpoints_per_run": per_run,
        "sequential_cps": seq_cps,
        "concurrent_cps": conc_cps,
        "ratio": conc_cps / seq_cps,
    }


def render_async(a: dict[str, Any]) -> list[str]:
    rows = [
        [f"{v['async']} vs {v['sync']}", f"failed: {v['error']}", "", "", ""]
        if "error" in v
        else [
            f"{v['async']} vs {v['sync']}",
            v["checkpoints_per_run"],
            fu(v["sequential_cps"]),
            fu(v["concurrent_cps"]),
            fx(v["ratio"], 1),
        ]
        for v in a["pairs"].values()
    ]
    rtts = [
        f"+{k.split('+')[1]}: PING {fu(v['round_trip_us'])} µs"
        for k, v in a["pairs"].items()
        if "round_trip_us" in v
    ]
    return section(
        f"(e) async: {a['threads']} counter-graph runs, median of {a['repeats']}",
        "Concurrent: all runs at once with asyncio.gather on the async saver. Sequential: "
        "the same runs one after another with the sync saver. Target for ours: ≥4×. "
        "On loopback every run is CPU-bound (InMemorySaver shows LangGraph's own ceiling); "
        "the `+N ms` rows talk to the same Redis through `benchmarks/latency_proxy.py`, "
        "which holds each burst back N ms in all (Redis in another zone)"
        + (f" ({'; '.join(rtts)})." if rtts else "."),
        "",
        md_table(
            ["async vs sync saver", "cp/run", "sequential cp/s", "concurrent cp/s", "ratio"], rows
        ),
    )
