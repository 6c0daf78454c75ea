"""A worker that runs an agent driven by a non-deterministic model until it finishes or
is SIGKILLed (test helper for the model journal).

    python -m tests.workers.journal_worker URL PREFIX THREAD EFFECTS DURABILITY sync|async \
        create_agent|toolnode [POINT NTH]

With POINT and NTH it kills itself with SIGKILL the NTH time it reaches POINT: the model
boundaries (model_start, model_answered: answered, not yet journaled; after_journal),
the tool boundaries (before_intent and after_result around the ledger, create_agent
only; tool_start, tool_after_effect) and LangGraph's checkpoint writes (put_before,
put_after, writes_before, writes_after). Escalations are answered from the effect file,
as a human would, and each question asked is written to it. Prints "done" once the run
completed; "ready" once it is about to run (for a soak that kills at random moments).
With ``HOLD_PUTS=N``, the worker's first N checkpoint puts land and every later one waits
(up to a minute, far longer than it lives): under durability "async" its checkpoints
queue up, as behind a slow Redis or on a loaded machine, and its SIGKILL loses them. With
``LGD_WORKER_LOG_DIR`` set, the ledger's decisions are logged (DEBUG) to a file there
named by the key prefix, for the reader of a failing test.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any

from langchain_core.messages import HumanMessage

from langgraph_durable import ToolLedger
from tests.helpers.journal_agent import POLICIES, Effects, build, next_input
from tests.workers import ledger_worker
from tests.workers.ledger_worker import HookedAsyncSaver, HookedSaver, hook

START_INPUT = {"messages": [HumanMessage(content="do the chores")]}


def run_sync(argv: list[str], effects: Effects) -> None:
    url, prefix, thread, _, durability, _, kind = argv[:7]
    with HookedSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = build(kind, ToolLedger(saver, policies=POLICIES), effects, saver, hook)
        config = {"configurable": {"thread_id": thread}}
        print("ready", flush=True)
        while (inp := next_input(graph.get_state(config), effects, START_INPUT)) != "done":
            graph.invoke(inp, config, durability=durability)


async def run_async(argv: list[str], effects: Effects) -> None:
    url, prefix, thread, _, durability, _, kind = argv[:7]
    async with HookedAsyncSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = build(kind, ToolLedger(saver, policies=POLICIES), effects, saver, hook)
        config = {"configurable": {"thread_id": thread}}
        print("ready", flush=True)
        while (inp := next_input(await graph.aget_state(config), effects, START_INPUT)) != "done":
            await graph.ainvoke(inp, config, durability=durability)


def hold_puts(landing: int) -> None:
    """Let the worker's first ``landing`` checkpoint puts through and hold every later
    one. LangGraph sends a run's puts one after another, so what is saved is exact."""
    put, aput, never = HookedSaver.put, HookedAsyncSaver.aput, threading.Event()
    count = iter(range(1, 1 << 30))

    def held(self: HookedSaver, *args: Any, **kwargs: Any) -> Any:
        if next(count) > landing:
            never.wait(60)  # the worker is killed long before
        return put(self, *args, **kwargs)

    async def aheld(self: HookedAsyncSaver, *args: Any, **kwargs: Any) -> Any:
        if next(count) > landing:
            await asyncio.get_running_loop().run_in_executor(None, never.wait, 60)
        return await aput(self, *args, **kwargs)

    HookedSaver.put = held  # type: ignore[method-assign]
    HookedAsyncSaver.aput = aheld  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    if log_dir := os.environ.get("LGD_WORKER_LOG_DIR"):
        logging.basicConfig(
            filename=os.path.join(log_dir, argv[1].replace("/", "_") + ".log"),
            format=f"%(asctime)s {os.getpid()} %(levelname)s %(message)s",
        )
        logging.getLogger("langgraph_durable").setLevel(logging.DEBUG)
    if (landing := os.environ.get("HOLD_PUTS")) is not None:
        hold_puts(int(landing))
    if len(argv) >= 9:
        ledger_worker._kill_point, ledger_worker._kill_nth = argv[7], int(argv[8])
    effects = Effects(argv[3])
    if argv[5] == "async":
        asyncio.run(run_async(argv, effects))
    else:
        run_sync(argv, effects)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
