"""A worker that runs the ledger agent's thread to the end under its lease (test helper).

    python -m tests.workers.lease_worker URL PREFIX THREAD EFFECTS GO [--ttl S] [--wait S]
        [--delay S] [--stop-at-start] [--async] [--no-lease] [--refused FILE]
        [--meet DIR --peers N --meet-rounds R]

It prints "ready" once imported and connected, then waits until the file GO exists, so
competing workers start together, then runs (or resumes) the thread holding its lease;
escalations are answered from the effect file.
  --stop-at-start  it stops itself (SIGSTOP) when its first tool call starts, as a
                   stalled process would.
  --refused FILE   a worker refused the lease creates FILE, and a worker holding it
                   runs only once FILE exists: the other worker always tries while the
                   lease is held, however the two are scheduled.
  --meet DIR       before its first run, once it read the thread's state, and in each
                   of its first R tool steps, once it read the ledger, it waits until
                   N workers got there (or ended their run): without a lease, all run
                   the same calls at once.
  --no-lease       it holds no lease, and after each run goes on from the newest
                   checkpoint it wrote itself (``own_newest``).
It prints one JSON line last: {"outcome": "done" | "LeaseHeldError" | "LeaseLostError",
"checkpoint_id": the newest checkpoint it wrote or saw}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from typing import Any

from langgraph_durable import (
    AsyncRedisSaver,
    LeaseHeldError,
    LeaseLostError,
    RedisSaver,
    ToolLedger,
)
from tests.helpers.ledger_agent import POLICIES, Effects, agent_graph
from tests.workers.ledger_worker import next_input


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("url", "prefix", "thread", "effects", "go"):
        parser.add_argument(name)
    parser.add_argument("--ttl", type=float, default=5.0)
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--stop-at-start", action="store_true")
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--no-lease", dest="lease", action="store_false")
    parser.add_argument("--refused")
    parser.add_argument("--meet")
    parser.add_argument("--peers", type=int, default=2)
    parser.add_argument("--meet-rounds", type=int, default=1)
    return parser.parse_args(argv)


# Waits for another process. Safety nets only: each wait ends on its file.
PATIENCE = 120.0


def meet_after_each_load(meet: str, peers: int, rounds: int) -> None:
    """The first ``rounds`` tool steps of this process, once they read their ledger
    entries, wait until ``peers`` workers read theirs: none has recorded an intent yet,
    so every one runs every call (what can happen without a lease, made certain). Hooks
    the read a ToolNode task makes before its calls begin (``escalations.load``)."""
    from langgraph_durable.ledger import escalations

    read = escalations.load
    met = [0]

    def load(lctx: Any, ctx: Any, lineage: Any) -> Any:
        yield from read(lctx, ctx, lineage)
        if met[0] < rounds:
            here = os.path.join(meet, f"step{met[0]}")
            met[0] += 1
            os.makedirs(here, exist_ok=True)
            open(os.path.join(here, str(os.getpid())), "w").close()
            wait_for(here, entries=peers, left=meet)

    escalations.load = load


def build(saver: Any, args: argparse.Namespace, effects: Effects) -> Any:
    stopped: list[bool] = []
    lock = threading.Lock()

    def hook(point: str, tool: str = "") -> None:
        if point == "tool_start" and args.stop_at_start:
            with lock:  # the first call that starts stops the process, once
                first = not stopped
                stopped.append(True)
            if first:
                os.kill(os.getpid(), signal.SIGSTOP)

    if args.meet:
        meet_after_each_load(args.meet, args.peers, args.meet_rounds)
    ledger = ToolLedger(saver, policies=POLICIES)
    return agent_graph(ledger, effects, hook=hook, delay=args.delay).compile(checkpointer=saver)


def wait_for(path: str, entries: int = 0, left: str | None = None) -> None:
    """Until ``path`` exists (and, a directory, holds ``entries`` entries). With ``left``
    (the meeting directory), a worker that finished its run counts as there: a worker
    whose graph resumed from a checkpoint the other wrote (no lease) runs fewer tool
    steps, and leaves without reaching the other's next meeting."""
    deadline = time.monotonic() + PATIENCE
    while not os.path.exists(path) or (entries and len(_present(path, left)) < entries):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {PATIENCE:.0f} s for {path}")
        time.sleep(0.005)


def _present(path: str, left: str | None) -> set[str]:
    """The pids arrived in ``path``, and those that left the meetings (``leave``)."""
    arrived = set(os.listdir(path))
    if left is None:
        return arrived
    return arrived | {n[len(_LEFT) :] for n in os.listdir(left) if n.startswith(_LEFT)}


_LEFT = "left-"


def leave(args: argparse.Namespace) -> None:
    """Say this worker will reach no more meetings (its run ended, however)."""
    if args.meet:
        os.makedirs(args.meet, exist_ok=True)
        open(os.path.join(args.meet, f"{_LEFT}{os.getpid()}"), "w").close()


WORKER = "lgd_test_worker"  # checkpoint metadata: the pid of the worker that wrote it


def tagged(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with this worker's pid in the metadata of every checkpoint it writes."""
    return {**config, "metadata": {WORKER: os.getpid()}}


def own_checkpoints(args: argparse.Namespace) -> tuple[Any, Any]:
    """``list``'s config and filter for the root checkpoints this worker wrote."""
    root = {"configurable": {"thread_id": args.thread, "checkpoint_ns": ""}}
    return root, {WORKER: os.getpid()}


def own_newest(found: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Where a worker without a lease goes on from: the newest checkpoint it wrote
    itself (``found``: its checkpoints, newest first), not the thread's newest. Two
    workers then never resume one task together (the ledger would let only one of
    them record a call, and the other's outcome would be unknown): each runs every
    call of its own chain, as two workers whose reads crossed would."""
    for checkpoint in found:
        return {"configurable": dict(checkpoint.config["configurable"])}
    return config


def meet_at_start(args: argparse.Namespace, met: bool) -> bool:
    """With --meet, before its first run: wait until every worker read the thread's
    state, so that all start from the same one (none from a checkpoint another wrote)."""
    if args.meet and not met:
        here = os.path.join(args.meet, "start")
        os.makedirs(here, exist_ok=True)
        open(os.path.join(here, str(os.getpid())), "w").close()
        wait_for(here, entries=args.peers, left=args.meet)
    return True


def holding(args: argparse.Namespace) -> None:
    """Inside the lease: with --refused, go on only once the other worker was refused."""
    if args.refused:
        wait_for(args.refused)


def refused(args: argparse.Namespace) -> None:
    if args.refused:
        open(args.refused, "w").close()


def run_sync(args: argparse.Namespace, effects: Effects) -> str | None:
    config = {"configurable": {"thread_id": args.thread}}
    met = False
    with RedisSaver.from_conn_string(args.url, key_prefix=args.prefix) as saver:
        graph = build(saver, args, effects)
        print("ready", flush=True)
        wait_for(args.go)
        lease = saver.lease(args.thread, ttl=args.ttl, wait=args.wait)
        with lease if args.lease else contextlib.nullcontext():
            holding(args)
            while (inp := next_input(graph.get_state(config), effects)) != "done":
                met = meet_at_start(args, met)
                graph.invoke(inp, tagged(config))
                if not args.lease:
                    root, mine = own_checkpoints(args)
                    config = own_newest(saver.list(root, filter=mine, limit=1), config)
            return graph.get_state(config).config["configurable"].get("checkpoint_id")


async def run_async(args: argparse.Namespace, effects: Effects) -> str | None:
    config = {"configurable": {"thread_id": args.thread}}
    met = False
    async with AsyncRedisSaver.from_conn_string(args.url, key_prefix=args.prefix) as saver:
        graph = build(saver, args, effects)
        print("ready", flush=True)
        await asyncio.to_thread(wait_for, args.go)
        lease = saver.alease(args.thread, ttl=args.ttl, wait=args.wait)
        async with lease if args.lease else contextlib.nullcontext():
            await asyncio.to_thread(holding, args)  # the loop goes on renewing the lease
            while (inp := next_input(await graph.aget_state(config), effects)) != "done":
                met = await asyncio.to_thread(meet_at_start, args, met)
                await graph.ainvoke(inp, tagged(config))
                if not args.lease:
                    root, mine = own_checkpoints(args)
                    found = [t async for t in saver.alist(root, filter=mine, limit=1)]
                    config = own_newest(found, config)
            return (await graph.aget_state(config)).config["configurable"].get("checkpoint_id")


def main() -> None:
    args = parse()
    effects = Effects(args.effects)
    try:
        if args.use_async:
            checkpoint_id = asyncio.run(run_async(args, effects))
        else:
            checkpoint_id = run_sync(args, effects)
        outcome = {"outcome": "done", "checkpoint_id": checkpoint_id}
    except (LeaseHeldError, LeaseLostError) as exc:
        if isinstance(exc, LeaseHeldError):
            refused(args)
        outcome = {"outcome": type(exc).__name__, "error": str(exc)}
    finally:
        leave(args)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
