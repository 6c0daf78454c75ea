"""A worker that runs the ledger agent until it finishes or is SIGKILLed (test helper).

    python -m tests.workers.ledger_worker URL PREFIX THREAD EFFECTS DURABILITY sync|async [POINT NTH]

With POINT and NTH it kills itself with SIGKILL the NTH time it reaches POINT:
before_intent, tool_start, tool_after_effect, after_result (around each tool call);
put_before, put_after, writes_before, writes_after (around LangGraph's checkpoint
writes). Escalations are answered from the effect file, as a human would.
With LGD_WORKER_HOLD set it exits only once its stdin is closed, even when done.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections import Counter
from typing import Any

from langgraph.types import Command

from langgraph_durable import AsyncRedisSaver, RedisSaver, ToolLedger
from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, agent_graph, answer

_seen: Counter[str] = Counter()
# Called once the worker is ready to run (the soak's forked workers set it).
on_ready: Any = None


def announce_ready() -> None:
    print("ready", flush=True)
    if on_ready is not None:
        on_ready()


_kill_point: str | None = None
_kill_nth = 0


_seen_lock = threading.Lock()  # parallel tool calls count together: no lost update


def hook(point: str, tool: str = "") -> None:
    with _seen_lock:
        _seen[point] += 1
        nth = _seen[point]
    if point == _kill_point and nth == _kill_nth:
        os.kill(os.getpid(), signal.SIGKILL)


class HookedSaver(RedisSaver):
    def put(self, *args: Any, **kwargs: Any) -> Any:
        hook("put_before")
        result = super().put(*args, **kwargs)
        hook("put_after")
        return result

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        hook("writes_before")
        super().put_writes(*args, **kwargs)
        hook("writes_after")


class HookedAsyncSaver(AsyncRedisSaver):
    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        hook("put_before")
        result = await super().aput(*args, **kwargs)
        hook("put_after")
        return result

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        hook("writes_before")
        await super().aput_writes(*args, **kwargs)
        hook("writes_after")


def next_input(state: Any, effects: Effects) -> Any:
    if not state.values:
        return START_INPUT
    if state.interrupts:
        return Command(resume={i.id: answer(i.value, effects) for i in state.interrupts})
    # A crash after every task of a step saved its writes, but before the next
    # checkpoint, leaves `next` empty with `tasks` still pending: resume it too.
    if state.next or state.tasks:
        return None
    return "done"


def build(ledger: ToolLedger, effects: Effects) -> Any:
    def wrap(request: Any, execute: Any) -> Any:
        hook("before_intent")
        result = ledger.wrap_tool_call(request, execute)
        hook("after_result")
        return result

    async def awrap(request: Any, execute: Any) -> Any:
        hook("before_intent")
        result = await ledger.awrap_tool_call(request, execute)
        hook("after_result")
        return result

    return agent_graph(ledger, effects, hook=hook, delay=0.002, wrap=wrap, awrap=awrap)


def run_sync(url: str, prefix: str, thread: str, effects: Effects, durability: str) -> None:
    client = HookedSaver.from_conn_string(url, key_prefix=prefix)
    with client as saver:
        graph = build(ToolLedger(saver, policies=POLICIES), effects).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        announce_ready()
        while (inp := next_input(graph.get_state(config), effects)) != "done":
            graph.invoke(inp, config, durability=durability)
    print("done", flush=True)


async def run_async(url: str, prefix: str, thread: str, effects: Effects, durability: str) -> None:
    async with HookedAsyncSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = build(ToolLedger(saver, policies=POLICIES), effects).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        announce_ready()
        while (inp := next_input(await graph.aget_state(config), effects)) != "done":
            await graph.ainvoke(inp, config, durability=durability)
    print("done", flush=True)


def main(argv: list[str]) -> None:
    global _kill_point, _kill_nth
    url, prefix, thread, effects_path, durability, mode = argv[:6]
    if len(argv) >= 8:
        _kill_point, _kill_nth = argv[6], int(argv[7])
    effects = Effects(effects_path)
    if mode == "async":
        asyncio.run(run_async(url, prefix, thread, effects, durability))
    else:
        run_sync(url, prefix, thread, effects, durability)
    if os.environ.get("LGD_WORKER_HOLD"):
        sys.stdin.read()  # stay alive until the harness closes stdin: a kill always lands


if __name__ == "__main__":
    main(sys.argv[1:])
