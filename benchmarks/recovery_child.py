"""Workload (g) of bench.py: a fresh process resumes a thread and runs one step.

    python benchmarks/recovery_child.py SAVER TARGET PREFIX THREAD ROUNDS PAYLOAD [STEPS]

With STEPS, it is the worker that dies instead: it starts the thread, runs STEPS
persisted supersteps, prints "ready" and waits for the SIGKILL the parent sends.

SAVER is durable | sqlite | postgres | valkey | plainredis; TARGET is the Redis URL, the
SQLite file or the Postgres conninfo. Prints one JSON line of wall-clock timestamps
(``time.time()``, comparable with the parent's) taken after each stage, so the parent
can split its launch-to-step time into interpreter start, import, connect, get_tuple
and the first resumed step. Only what a real worker needs is imported here.
"""

from __future__ import annotations

import time

T_START = time.time()

import json
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def import_saver(kind: str) -> Any:
    if kind == "durable":
        from langgraph_durable import RedisSaver

        return RedisSaver
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver
    if kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver
    if kind == "valkey":
        from langgraph_checkpoint_aws.checkpoint.valkey import ValkeySaver

        return ValkeySaver
    if kind == "plainredis":
        from langgraph_checkpoint_plainredis import RedisSaver as PlainRedisSaver

        return PlainRedisSaver
    raise SystemExit(f"unknown saver {kind}")


def connect(kind: str, cls: Any, target: str, prefix: str) -> AbstractContextManager[Any]:
    if kind == "durable":
        return cls.from_conn_string(target, key_prefix=prefix)
    if kind == "sqlite":
        return cls.from_conn_string(target)
    if kind in ("postgres", "valkey"):
        return cls.from_conn_string(target)
    from contextlib import closing

    return closing(cls(url=target, prefix=prefix))


def main() -> None:
    kind, target, prefix, thread, rounds, payload = sys.argv[1:7]
    cls = import_saver(kind)
    from langchain_core.runnables import RunnableConfig

    from tests.helpers import graphs  # the application's own graph code

    if len(sys.argv) > 7:  # the worker that is SIGKILLed after STEPS supersteps
        with connect(kind, cls, target, prefix) as saver:
            graph = graphs.react_graph(int(rounds), int(payload)).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
            updates = graph.stream(
                graphs.react_input(), config, durability="sync", stream_mode="updates"
            )
            for done, _ in enumerate(updates, 1):
                if done >= int(sys.argv[7]):
                    print("ready", flush=True)
                    time.sleep(3600)  # until the SIGKILL
        return

    stamps: dict[str, float] = {"start": T_START, "import": time.time()}
    with connect(kind, cls, target, prefix) as saver:
        stamps["connect"] = time.time()
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        latest = saver.get_tuple(config)
        stamps["get_tuple"] = time.time()
        graph = graphs.react_graph(int(rounds), int(payload)).compile(checkpointer=saver)
        # One superstep, persisted (durability="sync"), then stop.
        graph.invoke(None, config, durability="sync", interrupt_after=["agent", "tools"])
        stamps["step"] = time.time()
        after = saver.get_tuple(config)
    steps = [t.metadata.get("step") if t else None for t in (latest, after)]
    print(json.dumps({"stamps": stamps, "resumed_from_step": steps[0], "step_after": steps[1]}))


if __name__ == "__main__":
    main()
