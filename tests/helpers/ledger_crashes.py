"""Crashes for the in-process ledger tests: dying after a recorded result, losing a step.

``Crash`` is a BaseException that nothing catches, so what comes after it never runs
(the real thing, SIGKILLed subprocesses, is in test_ledger_crash.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.redis_keys import flip_last_bit

CONFIG = {"configurable": {"thread_id": "t"}}


class Crash(BaseException):
    """The process dies here: nothing after it runs, nothing catches it."""


def crash_after_result(
    ledger: ToolLedger, tool: str | None = None, times: int = 1
) -> Callable[[Any, Any], Any]:
    """A wrap_tool_call that dies right after the ledger recorded (or replayed) a result
    (of ``tool``, or of any call), the first ``times`` times, so LangGraph never saves
    the task's writes."""
    left = [times]

    def wrap(request: Any, execute: Any) -> Any:
        result = ledger.wrap_tool_call(request, execute)
        if left[0] and tool in (None, request.tool_call["name"]):
            left[0] -= 1
            raise Crash("after the result")
        return result

    return wrap


def lose_the_model_step(saver: RedisSaver, redis_client: Any) -> None:
    """Damage the newest checkpoint and the model's writes before it, so the saver falls
    back past both and LangGraph runs the model again, as after a lost async write."""
    newest, previous = list(saver.list(CONFIG, limit=2))
    tk = saver.keys.thread("t")
    flip_last_bit(redis_client, tk.cp, saver.keys.checkpoint_member("", newest.checkpoint["id"]))
    member = saver.keys.checkpoint_member("", previous.checkpoint["id"]).encode()
    for field in redis_client.hkeys(tk.wr):
        if field.startswith(member + b"\x00"):
            flip_last_bit(redis_client, tk.wr, field)
