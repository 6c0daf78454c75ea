"""Crash-and-resume demo: a worker running an agent is SIGKILLed mid-run; a fresh worker
resumes from the last checkpoint in Redis instead of starting over.

    python -m langgraph_durable.demo            # embedded Redis (or REDIS_URL)
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable.embedded import resolve_url
from langgraph_durable.saver import RedisSaver

STEPS = ["plan", "search", "read", "summarize", "draft", "review"]


class ResearchState(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]


def research_graph(effects: Path, delay: float) -> StateGraph:
    builder = StateGraph(ResearchState)

    def make(name: str):
        def node(state: ResearchState) -> dict[str, Any]:
            time.sleep(delay)
            with effects.open("a") as f:  # the step's visible effect
                f.write(json.dumps({"step": name, "pid": os.getpid()}) + "\n")
            return {"notes": [f"{name}: {state['topic']}"]}

        return node

    previous = START
    for name in STEPS:
        builder.add_node(name, make(name))
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


def worker(url: str, thread_id: str, effects: Path, delay: float) -> None:
    with RedisSaver.from_conn_string(url) as saver:
        graph = research_graph(effects, delay).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}}
        started = time.monotonic()
        state = graph.get_state(config)
        resumed_from = state.metadata.get("step") if state.metadata else None
        value = None if state.next else {"topic": "durable agents", "notes": []}
        result = graph.invoke(value, config, durability="sync")
        print(
            json.dumps(
                {
                    "resumed_from_step": resumed_from,
                    "notes": len(result["notes"]),
                    "seconds": round(time.monotonic() - started, 3),
                }
            ),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--worker", nargs=3, metavar=("URL", "THREAD", "EFFECTS"), help=argparse.SUPPRESS
    )
    parser.add_argument("--delay", type=float, default=0.4)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], args.worker[1], Path(args.worker[2]), args.delay)
        return 0

    url = resolve_url(args.redis_url)
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    effects = Path(tempfile.mkdtemp(prefix="lgd-demo-")) / "effects.jsonl"
    effects.touch()
    cmd = [
        sys.executable,
        "-m",
        "langgraph_durable.demo",
        "--delay",
        str(args.delay),
        "--worker",
        url,
        thread_id,
        str(effects),
    ]
    print(f"Redis: {url}   thread: {thread_id}")
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    while len(effects.read_text().splitlines()) < 3:  # let three steps finish
        time.sleep(0.02)
    time.sleep(args.delay / 2)  # ... and kill it in the middle of the fourth
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = [json.loads(line)["step"] for line in effects.read_text().splitlines()]
    print(f"worker {first.pid} killed with SIGKILL after: {', '.join(done_before)}")
    killed_at = time.monotonic()
    second = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    report = json.loads(second.stdout.strip().splitlines()[-1])
    timeline = [json.loads(line)["step"] for line in effects.read_text().splitlines()]
    print(
        f"fresh worker resumed from checkpoint at step {report['resumed_from_step']} "
        f"and finished in {time.monotonic() - killed_at:.2f}s"
    )
    print("timeline of step effects:", " -> ".join(timeline))
    repeated = sorted({s for s in timeline if timeline.count(s) > 1})
    complete = set(timeline) == set(STEPS) and report["notes"] == len(STEPS)
    print(f"steps repeated after the crash: {repeated or 'none'}")
    ok = complete and not repeated
    print(
        "VERDICT:",
        "OK: resumed from the last checkpoint, no finished step lost or repeated"
        if ok
        else "FAILED",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
