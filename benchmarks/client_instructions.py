"""The client's own work per superstep in instructions: the superstep guard's client share,
counted instead of timed.

    python benchmarks/client_instructions.py [--rounds 20] [--savers none,floor,durable,...]

Runs the benchmark's ReAct graph (``a_graph.py``'s, 1.5 KB per AI message, durability
``sync``) in one fresh process per saver under valgrind's callgrind (``apt install
valgrind``), with ``PYTHONHASHSEED=0`` (the hash seed changes how long dictionary probes
run), against a Redis server of this script's own run natively: two warm-up threads,
then two measured threads between a ``callgrind_control --zero`` and a dump. Every
thread of the process counts (LangGraph's background threads run the saver's puts), the
Redis server does not (``redis_instructions.py`` counts it). A superstep's wall time
moves by a fifth between runs of one machine (``RESULTS.md``); in two runs of these
counts, no checkpointer and ours moved by 0.02 % or less, the floor by 1.2 % (which of
LangGraph's waits on a future blocks depends on timing, and the floor's sends are big).
What they leave out: the kernel's share of each round trip, the wait on Redis, and how
the processor's caches meet the code. A process takes ~1-2 minutes
(Python under callgrind runs ~50x slower); two run at once.

It prints instructions per superstep for each saver and, for each durable saver, its
overhead over no checkpointer divided by the floor's (the guard's ratio, in
instructions, same API).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("none", "floor", "durable", "none-async", "floor-async", "durable-async")
MEASURED = 2  # threads counted per process


def child(kind: str, url: str, rounds: int) -> None:
    """In the process callgrind runs: warm up, then count ``MEASURED`` threads."""
    import redis.asyncio

    from benchmarks.harness import PAYLOAD
    from benchmarks.redis_work import opener
    from benchmarks.workloads.shared import AsyncRedisFloorSaver
    from tests.helpers import graphs

    loop = asyncio.new_event_loop()
    saver: Any = None
    # Opened as redis_work.py opens them; the process ends with the count: no exit.
    if kind == "floor-async":  # the one saver redis_work.py does not open
        saver = AsyncRedisFloorSaver(redis.asyncio.Redis.from_url(url), "floorwork")
    elif kind == "durable-async":
        saver = loop.run_until_complete(opener(kind, url).__aenter__())
    elif kind in ("floor", "durable"):
        saver = opener(kind, url).__enter__()
    graph = graphs.react_graph(rounds=rounds, payload=PAYLOAD).compile(checkpointer=saver)
    # Without a checkpointer LangGraph rejects `durability` (harness.Handle.invoke).
    kw = {"durability": "sync"} if saver is not None else {}

    def run(thread: str) -> None:
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
        if kind.endswith("async"):
            loop.run_until_complete(graph.ainvoke(graphs.react_input(), config, **kw))
        else:
            graph.invoke(graphs.react_input(), config, **kw)

    def control(*args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                       capture_output=True)  # fmt: skip
        # callgrind acts on a request when this process next wakes: asleep, nothing counts
        time.sleep(0.5)

    # threads of its own: two processes run at once, and the savers share a key prefix
    for i in range(2):
        run(f"{kind}-warm-{i}")
    control("--zero")
    for i in range(MEASURED):
        run(f"{kind}-measured-{i}")
    control("--dump=measured")


def count(kind: str, url: str, rounds: int, workdir: Path) -> float:
    """Instructions per superstep of saver ``kind``, counted in a process of its own."""
    out = workdir / f"{kind}.callgrind"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         __file__, "--child", kind, "--url", url, "--rounds", str(rounds)],
        env=env, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    dumps = sorted(workdir.glob(f"{kind}.callgrind.*"))
    if proc.returncode != 0 or not dumps:
        raise RuntimeError(f"{kind}: {proc.stderr.strip().splitlines()[-1:]}")
    found = re.search(r"^summary: (\d+)", dumps[0].read_text(), re.MULTILINE)
    assert found, f"no summary in {dumps[0]}"
    return int(found.group(1)) / (MEASURED * (2 * rounds + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--savers", default=",".join(KINDS))
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.url, args.rounds)
        return
    from tests.helpers.servers import start_server

    kinds = [k for k in args.savers.split(",") if k]
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(tmp)
        try:
            with ThreadPoolExecutor(2) as pool:  # each process is one core's worth
                counted = pool.map(lambda k: count(k, server.url, args.rounds, Path(tmp)), kinds)
                counts = dict(zip(kinds, counted, strict=True))
        finally:
            server.stop()
    print(f"\n## ReAct graph, {args.rounds} rounds: client instructions per superstep\n")
    print("| saver | instructions | overhead | overhead ÷ the floor's (same API) |")
    print("|---|---|---|---|")
    for kind, n in counts.items():
        suffix = "-async" if kind.endswith("async") else ""
        none, floor = counts.get("none" + suffix), counts.get("floor" + suffix)
        overhead = n - none if none is not None and kind != "none" + suffix else None
        ratio = ""
        if kind.startswith("durable") and overhead is not None and floor and floor > none:
            ratio = f"{overhead / (floor - none):.3f}×"
        shown = f"{overhead:,.0f}" if overhead is not None else ""
        print(f"| {kind} | {n:,.0f} | {shown} | {ratio} |")


if __name__ == "__main__":
    main()
