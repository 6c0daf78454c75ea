"""A worker that runs the ledger agent's thread to the end under its lease (test helper).

    python -m tests.lease_worker URL PREFIX THREAD EFFECTS GO [--ttl S] [--wait S]
        [--delay S] [--started FILE] [--async] [--no-lease]

It waits until the file GO exists, so competing workers start together, then runs (or
resumes) the thread holding its lease; escalations are answered from the effect file.
With --started it creates FILE when its first tool call starts (a test then SIGSTOPs
it). It prints one JSON line: {"outcome": "done" | "LeaseHeldError" | "LeaseLostError",
"checkpoint_id": the newest checkpoint it wrote or saw}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from typing import Any

from langgraph_durable import (
    AsyncRedisSaver,
    LeaseHeldError,
    LeaseLostError,
    RedisSaver,
    ToolLedger,
)
from tests.ledger_agent import POLICIES, Effects, agent_graph
from tests.ledger_worker import next_input


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("url", "prefix", "thread", "effects", "go"):
        parser.add_argument(name)
    parser.add_argument("--ttl", type=float, default=5.0)
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--started")
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--no-lease", dest="lease", action="store_false")
    return parser.parse_args(argv)


def build(saver: Any, args: argparse.Namespace, effects: Effects) -> Any:
    def hook(point: str, tool: str = "") -> None:
        if point == "tool_start" and args.started and not os.path.exists(args.started):
            open(args.started, "w").close()

    ledger = ToolLedger(saver, policies=POLICIES)
    return agent_graph(ledger, effects, hook=hook, delay=args.delay).compile(checkpointer=saver)


def wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.005)


def run_sync(args: argparse.Namespace, effects: Effects) -> str | None:
    config = {"configurable": {"thread_id": args.thread}}
    with RedisSaver.from_conn_string(args.url, key_prefix=args.prefix) as saver:
        graph = build(saver, args, effects)
        wait_for(args.go)
        lease = saver.lease(args.thread, ttl=args.ttl, wait=args.wait)
        with lease if args.lease else contextlib.nullcontext():
            while (inp := next_input(graph.get_state(config), effects)) != "done":
                graph.invoke(inp, config)
            return graph.get_state(config).config["configurable"].get("checkpoint_id")


async def run_async(args: argparse.Namespace, effects: Effects) -> str | None:
    config = {"configurable": {"thread_id": args.thread}}
    async with AsyncRedisSaver.from_conn_string(args.url, key_prefix=args.prefix) as saver:
        graph = build(saver, args, effects)
        wait_for(args.go)
        lease = saver.alease(args.thread, ttl=args.ttl, wait=args.wait)
        async with lease if args.lease else contextlib.nullcontext():
            while (inp := next_input(await graph.aget_state(config), effects)) != "done":
                await graph.ainvoke(inp, config)
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
        outcome = {"outcome": type(exc).__name__, "error": str(exc)}
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
