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
"""

from __future__ import annotations

import asyncio
import sys

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


def main(argv: list[str]) -> None:
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
