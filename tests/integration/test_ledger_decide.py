"""The cases issue 41 found, each through ledger/decide.py's table, on a real Redis.

A crash is ``Crash`` (a BaseException nothing catches), or a worker SIGKILLed; a new
process is a new ``ToolLedger`` and a new compiled graph (nothing kept in memory). The
model answers from its request, with fresh message and tool-call ids on every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_durable import RedisSaver
from tests.helpers.decide_agents import EchoModel, interrupting_agent
from tests.helpers.ledger_crashes import Crash

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


CONFIG: Any = {"configurable": {"thread_id": "t"}}
ASK = {"messages": [HumanMessage("trade for me")]}


def test_an_interrupt_answered_otherwise_after_a_crash_asks_the_model_again(
    saver: RedisSaver,
) -> None:
    """Q1 answered, the model's answer journaled, the worker dies before the checkpoint;
    the still-pending interrupt is answered Q2: the trade is Q2's, never Q1's."""
    done: list[str] = []
    model = EchoModel()
    graph = interrupting_agent(saver, model, done, crash_after_model=[1])
    graph.invoke(ASK, CONFIG)
    with pytest.raises(Crash):
        graph.invoke(Command(resume="Q1"), CONFIG)
    fresh = interrupting_agent(saver, model, done, crash_after_model=[0])  # a new process
    out = fresh.invoke(Command(resume="Q2"), CONFIG)
    assert done == ["Q2"] and out["messages"][-1].content == "done"
    assert model.calls == 3  # Q1, then Q2 asked anew, then "done"


@pytest.mark.parametrize("run_ids", [False, True])
def test_an_answered_interrupt_re_sent_to_its_checkpoint_places_no_trade_again(
    saver: RedisSaver, run_ids: bool
) -> None:
    """LangGraph runs the answered node again from its checkpoint; the journal gives it
    the same answer, and the trade from that very AI message is replayed (row 6)."""
    done: list[str] = []
    model = EchoModel()
    graph = interrupting_agent(saver, model, done, crash_after_model=[0])

    def run(config: Any) -> Any:
        if not run_ids:
            return config
        run_id = str(uuid.uuid4())
        return {**config, "configurable": {**config["configurable"], "run_id": run_id}}

    graph.invoke(ASK, run(CONFIG))
    asked_at = graph.get_state(CONFIG).config
    out = graph.invoke(Command(resume="Q1"), run(CONFIG))
    assert done == ["Q1"] and out["messages"][-1].content == "done"
    fresh = interrupting_agent(saver, model, done, crash_after_model=[0])
    out = fresh.invoke(Command(resume="Q1"), run(asked_at))
    assert done == ["Q1"], "the recorded trade was placed again"
    assert [m.content for m in out["messages"] if m.type == "tool"] == ["traded Q1"]


def test_a_subgraph_killed_under_exit_does_not_repeat_its_tool(
    redis_url: str, key_prefix: str, tmp_path: Any
) -> None:
    """A worker SIGKILLed right after its subgraph's trade under ``exit`` (nothing saved);
    the next sends the same input again: the trade's place survives (no enclosing task id
    in it), so it is asked about, and the human, who sees it went out, skips it."""
    effects = tmp_path / "effects"

    def worker(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = [redis_url, key_prefix, str(effects), *extra]
        return subprocess.run(
            [sys.executable, "-m", "tests.workers.subgraph_worker", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    killed = worker("kill")
    assert killed.returncode == -9, killed.stderr[-3000:]
    finished = worker()
    assert finished.returncode == 0, finished.stderr[-3000:]
    lines = [json.loads(line) for line in effects.read_text().splitlines()]
    assert [x["item"] for x in lines if x["kind"] == "trade"] == ["X"]
    assert [x["type"] for x in lines if x["kind"] == "asked"] == ["tool_call_diverged"]
    assert json.loads(finished.stdout)[-1] == "done"
