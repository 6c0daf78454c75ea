"""Executions against real crashes: the cases a review of ledger/executions.py found.

Workers (tests/workers/branch_worker.py) SIGKILL themselves at a chosen point and the
next one resumes, as an operator would; the e-mail must go out once, and the only
question ever asked is the legitimate one about the e-mail whose outcome the crash left
unknown. Also: a thread whose ledger predates executions, a branch made by
``update_state`` under ``durability="exit"``, and a ledger field that is not text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_durable import RedisSaver, ToolLedger
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.ledger.entries import seal_entry
from tests.helpers.journal_agent import toolnode_graph
from tests.helpers.ledger_agent import Effects
from tests.workers.branch_worker import TurnModel, build, make_tools

pytest.importorskip("langchain.agents")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ESCALATE_EMAIL = {"lookup": "readonly", "charge": "retry", "send_email": "escalate"}


def run_workers(
    url: str,
    prefix: str,
    effects: str,
    durability: str,
    kind: str,
    kills: list[tuple[str, int]],
    first: str = "lookup",
    run_id: str | None = None,
    hold_puts: bool = False,
) -> None:
    env = {**os.environ, **({"RUN_ID": run_id} if run_id else {})}
    for kill in [*kills, None]:
        if hold_puts:  # the killed workers' checkpoints never land
            env = (
                {**env, "HOLD_PUTS": "1"}
                if kill
                else {k: v for k, v in env.items() if k != "HOLD_PUTS"}
            )
        argv = [url, prefix, effects, durability, kind, first, json.dumps(ESCALATE_EMAIL)]
        if kill:
            argv += [kill[0], str(kill[1])]
        proc = subprocess.run(
            [sys.executable, "-m", "tests.workers.branch_worker", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if kill:
            assert proc.returncode == -9, f"not killed at {kill}: {proc.stderr[-3000:]}"
        else:
            assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]


def check_once(effects: Effects, questions: int = 1) -> None:
    lines = effects.lines()
    emails = [e for e in lines if e["kind"] == "effect" and e["tool"] == "send_email"]
    asked = [(e["tool"], e["args"]["type"]) for e in lines if e["kind"] == "asked"]
    assert len(emails) == 1, emails
    # one question, about the e-mail: its outcome unknown, or (where the ledger cannot
    # tell whether the run continues the crashed one, decide.py) beside the recorded one
    assert len(asked) == questions and asked[-1][0] == "send_email", asked
    assert {a[1] for a in asked} <= {"tool_outcome_unknown", "tool_call_diverged"}, asked


@pytest.mark.parametrize("kind", ["toolnode", "create_agent"])
def test_two_crashes_under_exit_after_a_read_only_call_send_one_email(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str
) -> None:
    """The first answer's only call is read only (never recorded): the answer is settled
    by the next model request that holds it, so the second resume replays it."""
    effects = str(tmp_path / "effects")
    kills = [("email_after_effect", 1), ("lookup", 1)]
    run_workers(redis_url, key_prefix, effects, "exit", kind, kills)
    check_once(Effects(effects))


def test_a_journaled_prompt_chain_resumes_under_exit(
    redis_url: str, key_prefix: str, tmp_path: Any
) -> None:
    """Its request is the prompt's variables: the digest leaves their message ids out."""
    effects = str(tmp_path / "effects")
    run_workers(redis_url, key_prefix, effects, "exit", "prompt", [("email_after_effect", 1)])
    check_once(Effects(effects))


@pytest.mark.parametrize("kind", ["toolnode", "create_agent"])
def test_an_async_crash_that_lost_every_checkpoint_resumes_its_execution(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str
) -> None:
    """Puts queued behind a slow Redis: the resumed run saves its own checkpoints before
    the crashed places, which are no news about the crashed execution."""
    effects = str(tmp_path / "effects")
    kills = [("email_after_effect", 1)]
    run_workers(redis_url, key_prefix, effects, "async", kind, kills, "charge", hold_puts=True)
    # Every checkpoint lost, no run ids: the ledger cannot tell this run from a new one
    # sending the same input (decide.py row 10), so it asks about each recorded call.
    check_once(Effects(effects), questions=2)
    charges = [
        e for e in Effects(effects).lines() if e["kind"] == "effect" and e["tool"] == "charge"
    ]
    assert len(charges) == 1, charges


@pytest.mark.parametrize("kind", ["toolnode", "create_agent"])
@pytest.mark.parametrize("durability", ["exit", "async"])
def test_an_answer_sent_as_a_new_run_finds_the_execution_it_answers(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, durability: str
) -> None:
    """As LangGraph Server: the crashed run is retried under its id and escalates; the
    human's answer comes as another run, from the checkpoint the retry stopped at."""
    effects = str(tmp_path / "effects")
    kills = [("email_after_effect", 1)]
    run_workers(redis_url, key_prefix, effects, durability, kind, kills, "charge", "run-1")
    check_once(Effects(effects))


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_a_branch_made_by_update_state_runs_as_new_or_is_asked_about(
    saver: RedisSaver, redis_url: str, key_prefix: str, tmp_path: Any, durability: str
) -> None:
    """Turn 2's question put on turn 1's checkpoint again (by another worker than the one
    that ran the turns), the thread run on without a checkpoint id (no time travel).
    Under "exit" the charge's step reaches turn 2's place from a start nobody saved and
    no run ids tell the runs apart: the ledger cannot tell an edit from turn 2 resumed
    (ledger/decide.py row 10), so it asks; a human who meant a new charge says "retry":
    a new call. Under "sync" the branch's steps are not turn 2's: nothing to ask."""
    path = str(tmp_path / "effects")
    argv = ["turns", redis_url, key_prefix, path, durability]
    subprocess.run(
        [sys.executable, "-m", "tests.workers.branch_worker", *argv], cwd=ROOT, check=True
    )
    model = TurnModel()
    effects = Effects(path)
    graph = toolnode_graph(ToolLedger(saver), model, make_tools(effects)).compile(
        checkpointer=saver
    )
    config = {"configurable": {"thread_id": "t"}}
    turn_one = next(
        s.config for s in graph.get_state_history(config) if len(s.values["messages"]) == 4
    )
    graph.update_state(turn_one, {"messages": [HumanMessage("b")]}, as_node="__input__")
    out = graph.invoke(None, config, durability=durability)
    if durability == "exit":  # under "sync" turn 2's steps were numbered otherwise
        (question,) = out["__interrupt__"]
        assert question.value["type"] == "tool_call_diverged"
        assert question.value["recorded"]["outcome"] == "result"
        out = graph.invoke(Command(resume={"action": "retry"}), config, durability=durability)
    assert model.calls == 2  # asked again, not replayed
    charges = [e for e in effects.lines() if e["tool"] == "charge"]
    assert len(charges) == 3 and len({c["key"] for c in charges}) == 3
    assert out["messages"][-1].content == "done 2"


def test_a_thread_recorded_before_executions_resumes_from_its_entries(
    saver: RedisSaver, redis_client: Any, tmp_path: Any
) -> None:
    """Entries in the layout without an execution part (an upgrade mid-thread) are the
    crashed execution's: replayed where recorded, the unknown one asked about."""
    from tests.helpers.ledger_crashes import Crash

    effects = Effects(str(tmp_path / "effects"))
    ledger = ToolLedger(saver, policies=ESCALATE_EMAIL)
    tools = make_tools(effects)
    send = tools[2].func

    def dying_send(body: str) -> str:
        send(body)
        raise Crash("after the e-mail went out")

    tools[2].func = dying_send
    graph = build("toolnode", ledger, tools, saver, "charge")
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage("do it")]}, config, durability="sync")
    # rewrite every entry as the version before executions wrote it
    tk = saver.keys.thread("t")
    for entry in ledger.entries("t"):
        where = saver.keys.parse_ledger_field(entry.field)
        prefix = saver.keys.ledger_task(where.checkpoint_ns, where.step, where.task)
        old = prefix + "\x00".join([f"{where.position:07d}", where.name, where.args_hash])
        moved = type(entry)(**{**vars(entry), "field": old, "execution": ""})
        redis_client.hdel(tk.lg, entry.field)
        redis_client.zrem(tk.lgx, entry.field)
        redis_client.hset(tk.lg, old, seal_entry(saver.core, "t", moved))
        redis_client.zadd(tk.lgx, {old: 0})
    assert all(e.execution == "" for e in ledger.entries("t"))
    tools[2].func = send
    out = graph.invoke(None, config)
    (question,) = out["__interrupt__"]
    assert question.value["type"] == "tool_outcome_unknown"
    emails = [e for e in effects.lines() if e["tool"] == "send_email"]
    assert len(emails) == 1


def test_a_ledger_field_that_is_not_text_is_reported_not_raised(
    saver: RedisSaver, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tk = saver.keys.thread("t")
    redis_client.hset(tk.lg, b"\xff\xfe", b"junk")
    redis_client.zadd(tk.lgx, {b"\xff\xfe": 0})
    ledger = ToolLedger(saver)
    assert ledger.entries("t") == [] and ledger.escalations(["t"]) == []
    assert "malformed ledger field" in caplog.text
    assert KeySchema.ledger_void_run(b"\xff\xfe") is None
