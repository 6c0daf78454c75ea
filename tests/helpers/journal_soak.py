"""Soak the model journal: SIGKILL journal workers at random moments until each run completes.

    python -m tests.helpers.journal_soak --runs 100 [--seed N] [--redis-url URL]

Each run picks an agent (create_agent or toolnode), a durability (sync, async, exit) and
sync or async, then starts workers (tests/workers/journal_worker.py), killing the first
few a random moment after they say "ready", until one finishes the run; the world is
checked as in tests/crash/test_journal_crash.py. Random moments make this a soak, not a test:
the test suite kills at chosen points.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid

from langgraph_durable import RedisSaver
from tests.crash.test_journal_crash import ROOT, check_world, final_state, lost_starts
from tests.helpers.ledger_agent import Effects


def one_run(url: str, rng: random.Random, kind: str, durability: str, mode: str) -> int:
    """The run's SIGKILLs; raises AssertionError if a worker fails or the world is wrong."""
    prefix, kills = f"lgdsoak{uuid.uuid4().hex[:8]}", 0
    with tempfile.TemporaryDirectory() as tmp:
        effects = os.path.join(tmp, "effects")
        to_kill = rng.randint(1, 6)
        for n in range(100):
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.workers.journal_worker", url, prefix, "t"]
                + [effects, durability, mode, kind],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            if n < to_kill and proc.stdout.readline().strip() == "ready":
                time.sleep(rng.uniform(0, 0.6))  # only where the kill lands
                proc.kill()
            out, err = proc.communicate(timeout=300)
            if proc.returncode == -9:
                kills += 1
                continue
            assert proc.returncode == 0, f"worker {n} failed:\n{err[-4000:]}"
            if n >= to_kill and "done" in out:
                exact = not lost_starts(url, prefix)
                check_world(final_state(url, prefix, kind), Effects(effects), exact)
                with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
                    saver.delete_thread("t")
                return kills
        raise AssertionError("the run did not complete after 100 workers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"))
    args = parser.parse_args()
    url = args.redis_url or "redis://127.0.0.1:6379"
    rng = random.Random(args.seed)
    total, started = 0, time.time()
    for run in range(args.runs):
        kind = rng.choice(["create_agent", "toolnode"])
        durability, mode = rng.choice(["sync", "async", "exit"]), rng.choice(["sync", "async"])
        kills = one_run(url, rng, kind, durability, mode)
        total += kills
        print(f"run {run + 1}: {kind} durability={durability} {mode}: {kills} kills ok", flush=True)
    print(
        f"soak passed: {total} SIGKILLs over {args.runs} runs in {time.time() - started:.0f}s, "
        "zero duplicate effects, no divergence, every run completed"
    )


if __name__ == "__main__":
    main()
