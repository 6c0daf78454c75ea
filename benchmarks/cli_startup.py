"""How long the command line takes to start: ``--version``, ``--help`` and ``server
status`` (which answers from the embedded server's files, without Redis), as a user runs
them, each a fresh process.

    python benchmarks/cli_startup.py [RUNS]

Prints the median and the worst of RUNS runs (default 15) per command, and the verdict
against the target (0.3 s each). On a run whose load average was above the machine's
cores it prints the figures but no verdict: start-up time is CPU time, and a loaded
machine measures the load.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 0.3  # seconds
COMMANDS = (["--version"], ["--help"], ["server", "status"])


def program() -> str:
    here = Path(sys.executable).parent / "langgraph-durable"
    return str(here) if here.exists() else "langgraph-durable"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=False, capture_output=True)
    return time.perf_counter() - started


def main(runs: int) -> None:
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    verdicts = []
    timed([program(), "--version"])  # the first start reads the files into the page cache
    for command in COMMANDS:
        times = sorted(timed([program(), *command]) for _ in range(runs))
        median = statistics.median(times)
        verdicts.append(median <= TARGET)
        print(f"{' '.join(command):<14} median {median:.3f} s  worst {times[-1]:.3f} s")
    print(f"load average {load:.2f} on {cores} cores")
    if load > cores:
        print("no verdict: the machine was loaded")
    else:
        print(f"verdict: {'PASS' if all(verdicts) else 'FAIL'} (median at most {TARGET} s each)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
