"""The side-by-side benchmark: langgraph-durable against LangGraph's own savers and the
other Redis checkpointers, every figure measured in ONE run on ONE machine, so ratios
compare like with like.

    python benchmarks/bench.py                 # full run (several minutes on 2 cores)
    python benchmarks/bench.py --quick         # smoke run, under ~2 minutes
    python benchmarks/bench.py --savers durable,valkey --out /tmp/bench

Competitor savers are optional; any that is missing or unreachable is skipped, saying
why. Install them in a venv of their own so the project's is not disturbed:

    python3 -m venv /work/benchvenv
    /work/benchvenv/bin/pip install -e '.[test,hiredis]' langgraph-checkpoint-sqlite \
        langgraph-checkpoint-postgres 'psycopg[binary,pool]' 'langgraph-checkpoint-aws[valkey]' \
        langgraph-checkpoint-plainredis langgraph-checkpoint-redis
    /work/benchvenv/bin/python benchmarks/bench.py --quick

Layout: ``harness.py`` (timing, the run, the registry of savers), ``savers.py`` (every
saver opened in one place), ``workloads/`` (one module per workload: it measures and
renders its own section), ``report.py`` (machine, targets, RESULTS.md); this file runs
the workloads asked for.

Workloads (medians; ratios against InMemorySaver from the same run, async rows against
InMemorySaver driven through the async API):
  a  ReAct graph, 40 rounds (81 supersteps), durability="sync": time and checkpointer
     overhead per superstep (against the same graph without a checkpointer); the
     superstep guard's figure from 21 trios per API run back to back (no checkpointer,
     the floor, ours)
  b  micro: put (one channel changed), put_writes, get_tuple(latest), list(limit=10) on
     a thread whose newest checkpoint holds 100 messages (~150 KB)
  c  the micro figures on threads of 10, 1,000 and 10,000 checkpoints
  d  the floor: serialize what a put writes and write it in one pipelined round trip
  e  100 concurrent graph runs on an async saver against the same runs sequentially
  f  bytes stored per checkpoint against the serialized size of the new data
  g  recovery: a fresh process from launch to its first resumed step; the read path
     alone, with and without a damaged newest checkpoint

Isolation on a shared Redis: every key this script creates contains a per-run tag
(``lgdb-<hex>``), in the key prefix or in the thread id; at the end it deletes exactly
the keys containing that tag. It never flushes a database. Postgres tables go into a
schema created (and dropped) by this run; SQLite lives in a temp dir.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import SAVERS, Bench  # after the path is set
from benchmarks.report import machine_info, overloaded, render, targets
from benchmarks.savers import OPENERS
from benchmarks.workloads.a_graph import workload_graph
from benchmarks.workloads.b_micro import workload_micro
from benchmarks.workloads.c_length import workload_length
from benchmarks.workloads.d_floor import workload_floor
from benchmarks.workloads.e_async import workload_async
from benchmarks.workloads.f_storage import workload_storage
from benchmarks.workloads.g_recovery import profile_durable, workload_recovery


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small n: a smoke run under ~2 minutes")
    p.add_argument(
        "--savers", default=",".join(SAVERS), help=f"comma-separated, from: {', '.join(SAVERS)}"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="where RESULTS.md and results.json go",
    )
    p.add_argument("--workloads", default="abcdefg", help="subset of a..g to run (default all)")
    p.add_argument(
        "--max-length", type=int, default=None, help="cap on the thread-length levels of (c)"
    )
    p.add_argument(
        "--fill-budget",
        type=float,
        default=60.0,
        help="seconds a saver may take to fill one (c) thread",
    )
    p.add_argument(
        "--redis-url", default=None, help="default: REDIS_URL, local 6379, else embedded"
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile RedisSaver put/get_tuple into OUT/profile.txt",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    q = args.quick
    wanted = [s.strip() for s in args.savers.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SAVERS]
    if unknown:
        raise SystemExit(f"unknown saver(s) {unknown}; choose from {list(SAVERS)}")
    keys = ["memory"] + [s for s in wanted if s != "memory"]  # the floor is always there
    if any(SAVERS[k][2] == "async" for k in keys) and "memory-async" not in keys:
        keys.insert(1, "memory-async")
    keys = sorted(dict.fromkeys(keys), key=list(SAVERS).index)
    levels = [10, 200] if q else [10, 1_000, 10_000]
    if args.max_length:
        levels = [lv for lv in levels if lv <= args.max_length] or [min(args.max_length, 10)]
    args.out.mkdir(parents=True, exist_ok=True)

    bench = Bench(args)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "config": {
            "quick": q,
            "savers": keys,
            "levels": levels,
            "workloads": args.workloads,
            "command": " ".join(
                ["python benchmarks/bench.py", *(sys.argv[1:] if argv is None else argv)]
            ),
        },
    }
    t_run = time.perf_counter()
    try:
        print(f"run tag {bench.tag}; Redis {bench.redis_url}", flush=True)
        bench.open(keys, OPENERS)
        results["skipped"] = bench.skipped
        results["notes"] = bench.notes
        results["machine"] = machine_info(bench)
        plan: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
            (
                "a",
                "graph",
                lambda: workload_graph(bench, rounds=10 if q else 40, repeats=2 if q else 7),
            ),
            ("b", "micro", lambda: workload_micro(bench, rounds=30 if q else 200)),
            (
                "c",
                "length",
                lambda: workload_length(
                    bench, levels, rounds=20 if q else 100, budget=args.fill_budget
                ),
            ),
            ("d", "floor", lambda: workload_floor(bench, rounds=50 if q else 500)),
            (
                "e",
                "async",
                lambda: workload_async(bench, threads=20 if q else 100, repeats=1 if q else 3),
            ),
            (
                "f",
                "storage",
                lambda: workload_storage(
                    bench, rounds=10 if q else 40, small_puts=20 if q else 100
                ),
            ),
            (
                "g",
                "recovery",
                lambda: workload_recovery(
                    bench, repeats=1 if q else 3, reads=30 if q else 200, competitors=not q
                ),
            ),
        ]
        for letter, name, fn in plan:
            if letter not in args.workloads:
                continue
            gc.collect()
            t0 = time.perf_counter()
            print(f"({letter}) {name} ...", flush=True)
            try:
                results[name] = fn()
            except Exception as exc:  # noqa: BLE001  (keep the other workloads' figures)
                traceback.print_exc()
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"({letter}) {name} done in {time.perf_counter() - t0:.1f} s", flush=True)
            # partial results survive a crash or a Ctrl-C later in the run
            (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
        if args.profile and "durable" in bench.handles:
            profile_durable(bench, args.out, rounds=50 if q else 300)
    finally:
        results["cleanup"] = bench.close()
    results["elapsed_s"] = time.perf_counter() - t_run
    results["load_average_at_end"] = os.getloadavg()
    results["targets"] = targets(results)
    report = render(results)
    (args.out / "RESULTS.md").write_text(report)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print()
    print(report)
    print(
        f"wrote {args.out / 'RESULTS.md'} and {args.out / 'results.json'} ({results['elapsed_s']:.0f} s)"
    )
    refused = overloaded(results)
    if refused:
        print(refused)


if __name__ == "__main__":
    main()
