"""Operators settle unknown outcomes without code: ``escalations`` lists the calls waiting
for a human across threads, ``resolve`` records an answer (who, when, why) and the
thread's next run applies it without interrupting again, from Python and from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from langgraph.types import Command

from langgraph_durable import (
    InvalidConfigError,
    RedisSaver,
    ToolLedger,
    ToolOutcomeUnknownError,
)
from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, answer, normalized
from tests.helpers.ledger_crashes import CONFIG, Crash
from tests.integration.test_ledger import crash_at, crash_graph, effect_lines


def crashed(saver: RedisSaver, effects: Effects, *tools: str, point: str = "tool_start") -> Any:
    """A graph whose ``tools`` died at ``point``: their outcomes are unknown. Returns the
    graph and its ledger."""
    ledger = ToolLedger(saver, policies=POLICIES)
    graph = crash_graph(ledger, effects, hook=crash_at(point, *tools)).compile(checkpointer=saver)
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, CONFIG)
    return graph, ledger


def waiting_after_a_resume(graph: Any, ledger: ToolLedger) -> list[Any]:
    out = graph.invoke(None, CONFIG)  # the escalations are raised: the thread waits
    assert out.get("__interrupt__")
    return ledger.escalations(["t"])


@pytest.mark.parametrize("action", ["retry", "skip"])
def test_a_resolved_call_is_applied_on_the_next_run_without_asking(
    saver: RedisSaver, effects: Effects, reference: list[Any], action: str
) -> None:
    point = "tool_after_effect" if action == "skip" else "tool_start"
    graph, ledger = crashed(saver, effects, "send_email", point=point)
    (pending,) = waiting_after_a_resume(graph, ledger)
    assert (pending.thread_id, pending.name, pending.kind) == (
        "t",
        "send_email",
        "tool_outcome_unknown",
    )
    assert pending.args == {"to": "user0@example.com"} and pending.age_seconds >= 0
    # The operator checks the outbox, as a human answering the interrupt would.
    value = {"idempotency_key": pending.idempotency_key, "name": "send_email", "args": pending.args}
    decided = answer(value, effects)
    assert decided["action"] == action
    entry = ledger.resolve(
        "t",
        pending.idempotency_key,
        action,
        result=decided.get("result"),
        reason="outbox",
        by="ann",
    )
    (decision,) = entry.decisions.values()
    assert (decision.action, decision.reason, decision.by) == (action, "outbox", "ann")
    assert ledger.escalations(["t"]) == []  # answered: nothing waits
    out = graph.invoke(None, CONFIG)  # no Command: the recorded decision answers
    assert "__interrupt__" not in out
    assert normalized(out["messages"]) == reference
    assert len(effect_lines(effects, "send_email")) == 3  # once per recipient, never twice
    (done,) = [e for e in ledger.entries("t") if e.idempotency_key == pending.idempotency_key]
    assert (done.state, done.resolution) == ("result", action)
    assert done.decisions  # who decided stays on the record


def test_fail_raises_in_the_graph_and_bad_answers_are_refused(
    saver: RedisSaver, effects: Effects
) -> None:
    graph, ledger = crashed(saver, effects, "send_email")
    (pending,) = waiting_after_a_resume(graph, ledger)
    key = pending.idempotency_key
    with pytest.raises(InvalidConfigError, match="needs the tool's output"):
        ledger.resolve("t", key, "skip")
    with pytest.raises(InvalidConfigError, match="no call waiting"):
        ledger.resolve("t", "lgd-nope", "retry")
    with pytest.raises(InvalidConfigError, match="action must be one of"):
        ledger.resolve("t", key, "ignore")
    ledger.resolve("t", key, "fail", reason="card declined upstream", by="ops")
    with pytest.raises(ToolOutcomeUnknownError, match="a human chose to fail it"):
        graph.invoke(None, CONFIG)


def test_a_decided_call_among_several_keeps_the_others_answers_in_order(
    saver: RedisSaver, effects: Effects, reference: list[Any]
) -> None:
    """Two calls wait; the operator answers the first, the second is answered through
    LangGraph: each answer reaches its own call on every replay."""
    graph, ledger = crashed(
        saver, effects, "send_email", "create_ticket", point="tool_after_effect"
    )
    out = graph.invoke(None, CONFIG)
    asked = [i.value["name"] for i in out["__interrupt__"]]
    assert asked == ["send_email"]  # raised one at a time, in the AI message's order
    # Both wait (their numbers were given together); the operator answers send_email.
    waiting = {e.name: e for e in ledger.escalations(["t"])}
    assert sorted(waiting) == ["create_ticket", "send_email"]
    first = waiting["send_email"]
    value = {"idempotency_key": first.idempotency_key, "name": first.name, "args": first.args}
    ledger.resolve("t", first.idempotency_key, "skip", result=answer(value, effects)["result"])
    out = graph.invoke(None, CONFIG)
    (second,) = out["__interrupt__"]
    assert second.value["name"] == "create_ticket"
    out = graph.invoke(Command(resume=answer(second.value, effects)), CONFIG)
    assert normalized(out["messages"]) == reference
    assert (
        len(effect_lines(effects, "send_email")) == len(effect_lines(effects, "create_ticket")) == 3
    )


def test_the_command_line_lists_and_resolves(
    saver: RedisSaver, effects: Effects, reference: list[Any], redis_url: str
) -> None:
    graph, ledger = crashed(saver, effects, "send_email")
    (pending,) = waiting_after_a_resume(graph, ledger)
    env = {**os.environ, "REDIS_URL": redis_url}
    cli = [sys.executable, "-m", "langgraph_durable.cli"]
    prefix = ["--key-prefix", saver.key_prefix]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*cli, *args, *prefix],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    listed = run("escalations", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["thread_id"], row["name"], row["idempotency_key"]) == (
        "t",
        "send_email",
        pending.idempotency_key,
    )
    table = run("escalations")
    assert pending.idempotency_key in table.stdout and "send_email" in table.stdout
    wrong = run("resolve", "t", "lgd-nope", "--retry")
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    both = run("resolve", "t", pending.idempotency_key, "--retry", "--fail")
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1
    done = run(
        "resolve", "t", pending.idempotency_key, "--retry", "--reason", "not sent", "--by", "ann"
    )
    assert done.returncode == 0, done.stderr
    shown = run("ledger", "t")
    assert "retry by ann: not sent" in shown.stdout
    assert json.loads(run("escalations", "--json").stdout) == []
    out = graph.invoke(None, CONFIG)
    assert normalized(out["messages"]) == reference
    assert len(effect_lines(effects, "send_email")) == 3
