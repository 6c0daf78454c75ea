"""A worker for the subgraph probe of tests/integration/test_ledger_decide.py: runs the
agent as a compiled subgraph under ``durability="exit"`` on thread "t", sending the input
again (a crashed exit run saved nothing), and answers questions from the effect file.
With ``kill`` it SIGKILLs itself right after its first trade took effect.

    python -m tests.workers.subgraph_worker URL PREFIX EFFECTS [kill]

Prints the final messages' contents as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_durable import RedisSaver
from tests.helpers.decide_agents import EchoModel, subgraph_agent


def main(argv: list[str]) -> None:
    url, prefix, path = argv[:3]
    kill = argv[3:] == ["kill"]

    def record(**line: Any) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def trade(item: str) -> None:
        record(kind="trade", item=item)
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)

    config: Any = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = subgraph_agent(saver, EchoModel(), trade)
        payload: Any = {"messages": [HumanMessage("trade for me")]}
        for _ in range(5):
            out = graph.invoke(payload, config, durability="exit")
            if "__interrupt__" not in out:
                print(json.dumps([m.content for m in out["messages"]]))
                return
            (question,) = out["__interrupt__"]
            record(kind="asked", type=question.value["type"])
            with open(path) as lines:
                traded = [json.loads(x)["item"] for x in lines if '"trade"' in x]
            item = question.value["recorded"]["args"]["item"]
            went_out = {"action": "skip", "result": f"traded {item}"}
            payload = Command(resume=went_out if item in traded else {"action": "retry"})
    sys.exit("stuck")


if __name__ == "__main__":
    main(sys.argv[1:])
