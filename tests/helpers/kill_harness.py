"""Drive the ledger agent through SIGKILLs until its run completes, and check the world.

Used by tests/crash/test_ledger_crash.py (a bounded number of kills) and as the soak script:

    python -m tests.helpers.kill_harness --kills 1000 [--redis-url URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.ledger_agent import (
    NON_IDEMPOTENT,
    POLICIES,
    ROUNDS,
    START_INPUT,
    Effects,
    agent_graph,
    normalized,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POINTS = (
    "before_intent",
    "tool_start",
    "tool_after_effect",
    "after_result",
    "put_before",
    "put_after",
    "writes_before",
    "writes_after",
)


@dataclass
class Outcome:
    workers: int
    kills: int


def run_until_done(
    url: str,
    prefix: str,
    thread: str,
    effects_path: str,
    *,
    durability: str,
    mode: str,
    kill_at: tuple[str, int] | None = None,
    random_kills: int = 0,
    max_delay: float = 0.25,
    rng: random.Random | None = None,
    max_workers: int = 200,
    fork: bool = False,
) -> Outcome:
    """Start workers until one finishes the run. The first kills itself at ``kill_at``;
    the next ``random_kills`` are SIGKILLed from here at a random moment. With ``fork``
    the workers are forked from this (already imported) process: the same SIGKILLs,
    without paying for the imports each time."""
    rng = rng or random.Random(0)
    kills = 0
    for n in range(max_workers):
        argv = [url, prefix, thread, effects_path, durability, mode]
        if n == 0 and kill_at is not None:
            argv += [kill_at[0], str(kill_at[1])]
        kill_after = rng.uniform(0, max_delay) if n < random_kills else None
        code, err = (_forked_worker if fork else _exec_worker)(argv, kill_after)
        if code == -9:
            kills += 1
            continue
        if code != 0:  # a worker exits 0 only once the run is done
            raise AssertionError(f"worker {n} failed ({code}):\n{err}")
        return Outcome(workers=n + 1, kills=kills)
    raise AssertionError(f"the run did not complete after {max_workers} workers")


def _exec_worker(argv: list[str], kill_after: float | None) -> tuple[int | None, str]:
    """Run one worker; with ``kill_after``, SIGKILL it that long after it is ready. It
    is held alive until then even if its run is done first, so the kill always lands
    (however fast or slow the machine): a worker marked for a kill is always killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.workers.ledger_worker", *argv],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LGD_WORKER_HOLD": "1"},
    )
    assert proc.stdout is not None
    if kill_after is not None:
        assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=120)[1]
        time.sleep(kill_after)  # only where the kill lands: any moment will do
        proc.kill()
    _, err = proc.communicate(timeout=300)  # closes stdin: a held worker exits
    return proc.returncode, err[-4000:]


def _forked_worker(argv: list[str], kill_after: float | None) -> tuple[int | None, str]:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()

    def target() -> None:
        from tests import ledger_worker

        ledger_worker.on_ready = ready.set
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the child exits with it open
        ledger_worker.main(argv)

    proc = ctx.Process(target=target)
    proc.start()
    if kill_after is not None and ready.wait(timeout=60):
        time.sleep(kill_after)
        proc.kill()
    proc.join(timeout=120)
    return proc.exitcode, "(forked worker: see its traceback above)"


def reference_messages(url: str) -> list[Any]:
    """The final messages of an uninterrupted run."""
    prefix = f"lgdref{uuid.uuid4().hex[:8]}"
    with (
        tempfile.TemporaryDirectory() as tmp,
        RedisSaver.from_conn_string(url, key_prefix=prefix) as saver,
    ):
        try:
            ledger = ToolLedger(saver, policies=POLICIES)
            graph = agent_graph(ledger, Effects(os.path.join(tmp, "e"))).compile(checkpointer=saver)
            out = graph.invoke(START_INPUT, {"configurable": {"thread_id": "ref"}})
            return normalized(out["messages"])
        finally:
            saver.delete_thread("ref")


def check_world(effects: Effects, final: list[Any], reference: list[Any]) -> None:
    """Each call's effect happened exactly once, retries reused the call's idempotency
    key, and the conversation equals an uninterrupted run's."""
    lines = effects.lines()
    by_tool: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        if line["kind"] == "effect":
            by_tool[line["tool"]].append(line)
    for tool in (*NON_IDEMPOTENT, "charge"):
        done = by_tool[tool]
        keys = [e["key"] for e in done]
        assert len(done) == ROUNDS, f"{tool} took effect {len(done)} times, want {ROUNDS}: {done}"
        assert len(set(keys)) == ROUNDS and None not in keys, f"{tool} keys: {keys}"
    attempts: dict[int, set[str]] = defaultdict(set)
    for line in lines:
        if line["tool"] == "charge" and line["kind"] == "attempt":
            attempts[line["args"]["amount"]].add(line["key"])
    assert all(len(keys) == 1 for keys in attempts.values()), f"charge retries: {attempts}"
    assert final == reference


def final_messages(url: str, prefix: str, thread: str) -> list[Any]:
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert latest is not None
        return normalized(latest.checkpoint["channel_values"]["messages"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--exec", action="store_true", help="exec a fresh interpreter per worker (slower)"
    )
    args = parser.parse_args()
    url = args.redis_url or "redis://127.0.0.1:6379"
    rng = random.Random(args.seed)
    reference = reference_messages(url)
    total = runs = 0
    started = time.time()
    while total < args.kills:
        durability, mode = rng.choice(["sync", "async"]), rng.choice(["sync", "async"])
        prefix, thread = f"lgdsoak{uuid.uuid4().hex[:8]}", "soak"
        with tempfile.TemporaryDirectory() as tmp:
            effects_path = os.path.join(tmp, "effects")
            kill_at = (rng.choice(POINTS), rng.randint(1, 6)) if rng.random() < 0.5 else None
            print(f"run {runs + 1}: {prefix} durability={durability} {mode} kill_at={kill_at}")
            outcome = run_until_done(
                url,
                prefix,
                thread,
                effects_path,
                durability=durability,
                mode=mode,
                kill_at=kill_at,
                random_kills=rng.randint(1, 8),
                rng=rng,
                fork=not args.exec,
                max_delay=0.25 if args.exec else 0.12,  # a forked worker's run takes ~0.15 s
            )
            check_world(Effects(effects_path), final_messages(url, prefix, thread), reference)
            with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
                saver.delete_thread(thread)
        total += outcome.kills
        runs += 1
        print(
            f"run {runs}: kills={outcome.kills} (total {total}) ok",
            flush=True,
        )
    print(
        f"soak passed: {total} SIGKILLs over {runs} runs in {time.time() - started:.0f}s, "
        "zero duplicate effects, every run completed with the uninterrupted final state"
    )


if __name__ == "__main__":
    main()
