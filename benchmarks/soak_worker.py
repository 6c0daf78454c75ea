"""A worker of the failover soak (``failover_soak.py``): runs threads one after another
through whatever the sentinel names, until told to stop.

    python benchmarks/soak_worker.py SENTINEL_URL PREFIX WORKER_ID DIR [WAIT_FOR_REPLICAS]

Each thread is a chain of STEPS nodes; each node makes one side effect through
``@ledger.durable``, appended with its idempotency key to DIR/effects (fsync'd before
the call returns, as an external API that keeps what it did). ``wait_for_replicas`` is
WAIT_FOR_REPLICAS (1 by default).
An error from the saver (``DurableError``: a failover past its budget, a write not
replicated) is logged and the thread resumed (``invoke(None)``); anything else that
reaches the worker is logged as a raw error and resumed the same way. A question the
ledger asks (an effect whose outcome is unknown) is answered from the effect log, as an
operator would. Lines it appends (JSON, one per event), in DIR/worker-ID.log:
``{"t": ..., "event": "step" | "done" | "durable_error" | "raw_error", ...}``.
Its current thread is kept in DIR/worker-ID.current (fsync'd), so a worker SIGKILLed and
started again resumes it. It stops once DIR/stop exists.
"""

from __future__ import annotations

import json
import operator
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.runnables import RunnableConfig
from langgraph.errors import EmptyInputError
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import DurableError, RedisSaver, ToolLedger
from langgraph_durable.ledger import idempotency_key

STEPS = 6
OPTIONS = {"wait_for_replicas": 1, "replica_timeout": 2, "failover_timeout": 60}


class State(TypedDict):
    trail: Annotated[list[int], operator.add]


def append(path: Path, line: dict[str, Any], sync: bool = False) -> None:
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\n")
        out.flush()
        if sync:
            os.fsync(out.fileno())


def build(saver: Any, ledger: ToolLedger, effects: Path, log: Path, worker: str) -> Any:
    @ledger.durable(name="effect")
    def effect(thread: str, step: int) -> str:
        append(effects, {"key": idempotency_key(), "thread": thread, "step": step}, sync=True)
        return f"{thread}:{step}"

    builder = StateGraph(State)
    for i in range(STEPS):

        def node(state: State, config: RunnableConfig, i: int = i) -> dict[str, list[int]]:
            thread = config["configurable"]["thread_id"]
            append(log, {"t": time.time(), "event": "step", "thread": thread, "step": i})
            effect(thread, i)
            return {"trail": [i]}

        builder.add_node(f"n{i}", node)
        builder.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    builder.add_edge(f"n{STEPS - 1}", END)
    return builder.compile(checkpointer=saver)


def answer(value: dict[str, Any], effects: Path) -> dict[str, Any]:
    """An operator's answer from the effect log: done -> skip with its result."""
    key = value.get("idempotency_key") or value.get("recorded", {}).get("idempotency_key")
    lines = [json.loads(x) for x in effects.read_text().splitlines()] if effects.exists() else []
    for line in lines:
        if line["key"] == key:
            return {"action": "skip", "result": f"{line['thread']}:{line['step']}"}
    return {"action": "retry"}


def run_thread(graph: Any, thread: str, fresh: bool, effects: Path, log: Path) -> None:
    config = {"configurable": {"thread_id": thread}}
    inp: Any = {"trail": []} if fresh else None
    while True:
        try:
            if inp is None:  # resumed: killed before its first put, or after its last
                state = graph.get_state(config)
                if not state.values:
                    inp = {"trail": []}
                elif not state.tasks:  # no task left, done or not (a task whose writes
                    # were saved before the kill is not in `next`, yet the run goes on)
                    append(log, {"t": time.time(), "event": "done", "thread": thread,
                                 "trail": state.values.get("trail")})  # fmt: skip
                    return
            out = graph.invoke(inp, config)
        except EmptyInputError:  # killed before its input's writes were saved: send it
            inp = {"trail": []}
            continue
        except DurableError as exc:
            what = f"{type(exc).__name__}: {exc}"[:300]
            if exc.__context__ is not None:  # what it was raised over (LangGraph's own
                cause = exc.__context__  # put of a checkpoint raises over the put before)
                what += f" [after {type(cause).__name__}: {str(cause)[:300]}]"
            append(log, {"t": time.time(), "event": "durable_error", "error": what})
            inp = None
            continue
        except Exception as exc:  # noqa: BLE001 - what the soak counts
            import traceback

            traceback.print_exc()  # to the worker's stderr file
            what = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"[:300]
            append(log, {"t": time.time(), "event": "raw_error", "error": what})
            inp = None
            continue
        pending = out.get("__interrupt__") if isinstance(out, dict) else None
        if pending:
            inp = Command(resume={i.id: answer(i.value, effects) for i in pending})
            continue
        append(log, {"t": time.time(), "event": "done", "thread": thread, "trail": out["trail"]})
        return


def main() -> None:
    url, prefix, worker, folder = sys.argv[1:5]
    wait = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    root = Path(folder)
    effects, log = root / "effects", root / f"worker-{worker}.log"
    current = root / f"worker-{worker}.current"
    options = {**OPTIONS, "wait_for_replicas": wait}
    with RedisSaver.from_conn_string(url, key_prefix=prefix, **options) as saver:
        graph = build(saver, ToolLedger(saver), effects, log, worker)
        n, fresh = 0, True
        if current.exists():  # started again after a SIGKILL: resume that thread
            n, fresh = int(current.read_text()), False
        append(log, {"t": time.time(), "event": "started", "resumes": None if fresh else n})
        print("ready", flush=True)
        while not (root / "stop").exists():
            if fresh:
                current.write_text(str(n))
                with open(current) as f:
                    os.fsync(f.fileno())
            run_thread(graph, f"{worker}-{n}", fresh, effects, log)
            n, fresh = n + 1, True


if __name__ == "__main__":
    main()
