"""Source data for the migration tests: real graphs run on another checkpointer, and what
a thread's history holds, to compare two savers by."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from tests.helpers.graphs import (
    approval_graph,
    counter_graph,
    delta_graph,
    fan_out_graph,
    subgraph_graph,
)
from tests.helpers.redis_keys import glob_escape

THREADS = ["approval-done", "approval-open", "delta", "fan-failed", "fork", "sub-open"]


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def populate(saver: BaseCheckpointSaver) -> None:
    """Run the graphs on ``saver``: interrupts (pending writes), a subgraph (namespaces),
    a DeltaChannel, parallel tasks with an error write, a fork (two children of one
    checkpoint)."""
    approval = approval_graph().compile(checkpointer=saver)
    approval.invoke({"request": "open", "decision": ""}, config("approval-open"))
    approval.invoke({"request": "done", "decision": ""}, config("approval-done"))
    approval.invoke(Command(resume="yes"), config("approval-done"))
    subgraph_graph().compile(checkpointer=saver).invoke({"log": []}, config("sub-open"))
    delta_graph(7).compile(checkpointer=saver).invoke({"items": [], "n": 0}, config("delta"))
    fan = fan_out_graph({}, {2}, saver).compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="worker 2 failed"):
        fan.invoke({"items": [1, 2, 3], "results": []}, config("fan-failed"))
    counter = counter_graph().compile(checkpointer=saver)
    counter.invoke({"value": 1, "trail": []}, config("fork"))
    before_a = list(counter.get_state_history(config("fork")))[-2].config
    counter.invoke(None, counter.update_state(before_a, {"value": 100}))


def history(saver: BaseCheckpointSaver, thread_id: str) -> dict[tuple[str, str], Any]:
    """Every checkpoint of the thread, every namespace: its parent, the checkpoint with
    its channel values, its metadata and its pending writes in order."""
    found = {}
    for tup in saver.list(config(thread_id)):
        conf = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        found[(conf["checkpoint_ns"], conf["checkpoint_id"])] = (
            parent,
            tup.checkpoint,
            tup.metadata,
            tup.pending_writes,
        )
    return found


def resume_all(saver: BaseCheckpointSaver) -> dict[str, Any]:
    """Finish the unfinished threads on ``saver``; what each run returned, its final
    state, and which fan-out workers ran again."""
    done: dict[str, Any] = {}
    approval = approval_graph().compile(checkpointer=saver)
    done["approval-open"] = approval.invoke(Command(resume="ok"), config("approval-open"))
    subgraph = subgraph_graph().compile(checkpointer=saver)
    done["sub-open"] = subgraph.invoke(Command(resume="fine"), config("sub-open"))
    calls = {1: 1, 2: 1, 3: 1}  # each ran once on the source; 2 failed
    fan = fan_out_graph(calls, {2}, saver).compile(checkpointer=saver)
    done["fan-failed"] = (fan.invoke(None, config("fan-failed")), calls)
    for graph, thread_id in (
        (approval, "approval-open"),
        (subgraph, "sub-open"),
        (fan, "fan-failed"),
    ):
        state = graph.get_state(config(thread_id))
        done[f"{thread_id} state"] = (state.values, state.next)
    return done


def checkpoints_in_redis(client: redis.Redis, prefix: str) -> int:
    return sum(client.zcard(k) for k in client.scan_iter(match=glob_escape(prefix) + ":*:cps"))


def layout(client: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key of ``prefix`` (without it) with its hash fields or sorted-set members:
    what records exist, whatever bytes they hold."""
    found: dict[str, Any] = {}
    for key in client.scan_iter(match=glob_escape(prefix) + ":*"):
        kind = client.type(key)
        name = key.decode()[len(prefix) :]
        if kind == b"hash":
            found[name] = sorted(client.hkeys(key))
        elif kind == b"zset":
            found[name] = client.zrange(key, 0, -1)
        else:
            found[name] = kind
    return found
