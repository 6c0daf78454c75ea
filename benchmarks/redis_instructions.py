"""Redis's own work per superstep in instructions: the one Redis-cost figure that does not
move with the machine.

    python benchmarks/redis_instructions.py [--rounds 40] [--savers floor,durable,...]

Runs a redis-server of its own under valgrind's callgrind (``apt install valgrind``) and
each saver of ``redis_work.py`` through the same workloads, one warm-up thread and one
measured thread each, and divides the instructions Redis executed for the measured
thread (user space: the commands, the scripts' Lua, parsing and replying) by its
supersteps. Timings and ``INFO cpu`` move by 15-20 % between runs of one machine; these
counts move by well under 1 %. What they leave out is the kernel's share of each round
trip (``redis_work.py``'s CPU figures have it): a saver that sends more round trips
costs Redis more there. Redis under callgrind runs ~50x slower: a run takes a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.redis_work import WORKLOADS, installed, opener
from langgraph_durable.tools.embedded import find_server_binary
from tests.helpers import graphs
from tests.helpers.servers import free_port


class Callgrind:
    """redis-server under callgrind; ``count()`` runs a callable and returns the
    instructions Redis executed meanwhile."""

    def __init__(self, workdir: str) -> None:
        self.port = free_port()
        self.out = Path(workdir) / "callgrind.out"
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}",
             find_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir,
        )  # fmt: skip
        self.client = redis.Redis(port=self.port)
        self.dumps = 0
        for _ in range(600):
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("redis-server under callgrind did not answer")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True,
                       capture_output=True)  # fmt: skip
        # callgrind acts on a request when Redis next wakes up: a PING wakes it
        self.client.ping()

    def count(self, run: Any) -> int:
        self._control("--zero")
        time.sleep(0.3)
        self.client.ping()
        run()
        self._control("--dump=measured")
        self.dumps += 1
        dump = Path(f"{self.out}.{self.dumps}")
        for _ in range(300):
            if dump.exists() and "totals:" in dump.read_text():
                break
            self.client.ping()
            time.sleep(0.1)
        found = re.search(r"^summary: (\d+)", dump.read_text(), re.MULTILINE)
        assert found, f"no summary in {dump}"
        return int(found.group(1))

    def stop(self) -> None:
        self.client.shutdown(nosave=True)
        self.client.close()
        self.proc.wait(timeout=60)


def measure(server: Callgrind, kinds: list[str], rounds: int) -> dict[str, dict[str, float]]:
    supersteps = 2 * rounds + 1
    out: dict[str, dict[str, float]] = {}
    for workload, make in WORKLOADS.items():
        builder = make(rounds)
        out[workload] = {}
        for kind in kinds:
            loop = asyncio.new_event_loop()
            manager = opener(kind, server.url)
            is_async = kind.endswith("async")
            saver = (
                loop.run_until_complete(manager.__aenter__()) if is_async else manager.__enter__()
            )
            graph = builder.compile(checkpointer=saver)

            def run(thread: str, graph: Any = graph, loop: Any = loop, prefix: str = "") -> None:
                config = {"configurable": {"thread_id": f"{prefix}-{thread}"}}
                if prefix.endswith("async"):
                    loop.run_until_complete(
                        graph.ainvoke(graphs.react_input(), config, durability="sync")
                    )
                else:
                    graph.invoke(graphs.react_input(), config, durability="sync")

            prefix = f"{workload}-{kind}"
            try:
                run("warm", prefix=prefix)  # loads the scripts, fills the caches
                out[workload][kind] = (
                    server.count(functools.partial(run, "measured", prefix=prefix)) / supersteps
                )
            finally:
                if is_async:
                    loop.run_until_complete(manager.__aexit__(None, None, None))
                else:
                    manager.__exit__(None, None, None)
                loop.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--savers", default="floor,durable,durable-async,plainredis,plainredis-async"
    )
    args = parser.parse_args()
    kinds = installed(args.savers)
    with tempfile.TemporaryDirectory() as tmp:
        server = Callgrind(tmp)
        try:
            results = measure(server, kinds, args.rounds)
        finally:
            server.stop()
    for workload, by_kind in results.items():
        print(f"\n## {workload}: Redis instructions per superstep ({2 * args.rounds + 1})\n")
        print("| saver | instructions | × checkpoint-plainredis |")
        print("|---|---|---|")
        for kind, count in by_kind.items():
            rival = by_kind.get("plainredis-async" if kind.endswith("async") else "plainredis")
            ratio = f"{count / rival:.2f}×" if rival else ""
            print(f"| {kind} | {count:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
