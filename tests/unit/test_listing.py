"""``list`` without a namespace, driven by hand: the walk over every namespace asks the
read script for a page at a time and starts each page below the script's cursor."""

from __future__ import annotations

from typing import Any

from langgraph_durable.core.ops import Batch, Emit, Script
from langgraph_durable.core.records import LIST_PAGE
from tests.unit.scripted import THREAD, Thread, make_core


def test_every_namespace_is_walked_a_page_at_a_time_from_the_scripts_cursor() -> None:
    core = make_core()
    thread = Thread(core)
    ids = [thread.checkpoint(step, {"messages": [step]}) for step in range(LIST_PAGE + 1)]
    timeline = [f"{i}\x00".encode() for i in ids]  # root checkpoints' timeline members
    newest_first = [[*thread.entry(ids[i]), timeline[i]] for i in reversed(range(len(ids)))]
    pages = iter([newest_first[:LIST_PAGE], newest_first[LIST_PAGE:]])

    plan = core.list({"configurable": {"thread_id": THREAD}}, filter={"step": 0})
    asked: list[list[Any]] = []
    emitted = []
    reply: Any = None
    while True:
        try:
            op = plan.send(reply)
        except StopIteration:
            break
        if isinstance(op, Emit):
            emitted.append(op.item)
            reply = None
        elif isinstance(op, Script) and op.name == "read_checkpoints":
            asked.append(op.args)
            reply = thread.read_reply(*next(pages))
        else:
            assert isinstance(op, Batch)
            reply = thread.hmget(op)
    assert [t.checkpoint["id"] for t in emitted] == [ids[0]]
    assert asked == [
        ["all", "", LIST_PAGE],  # a filter reads whole pages
        ["all", timeline[1], LIST_PAGE],  # the next starts below the last entry read
    ]
