"""The model journal against real crashes, with a model that answers differently on every
call (fresh tool-call ids, other wording): worker processes SIGKILLed at the model's
boundaries, the tools' and LangGraph's checkpoint writes, restarted until the run
completes; for ``create_agent`` (``ledger.middleware()``) and a hand-written ToolNode
agent (``ledger.model`` + ``ledger.tool_node``), sync and async, under every durability.

Each worker kills itself at the chosen point of its schedule (synchronized on the run's
own progress, no timers); the test checks every kill landed (with durability "async", a
late one may find the run already over: see ``run_schedule``). Then: every effect happened
exactly once and is one of the final conversation's calls, the run finished (nothing
pending, no question left), and no divergence was ever asked about. Escalations of
unknown tool outcomes are legitimate and answered from the effect file, as a human would.

That holds while every recorded call started from a checkpoint that was saved. Under
durability "async" LangGraph saves checkpoints in the background, steps ahead of them; a
SIGKILL may lose some (behind a slow Redis, on a loaded machine), and a call recorded
from a lost checkpoint cannot be told from a new run's (decide.py row 10): the model is
asked again and its new answer's calls are asked about beside the recorded ones. Then
each effect still happened once and each final call has one, not with its wording
(``lost_starts``; a test holds the killed workers' puts to lose them for certain).
A control run without journaling shows what the test catches.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.journal_agent import NON_IDEMPOTENT, ROUNDS, TOOLS, build, rounds_in
from tests.helpers.ledger_agent import Effects

pytest.importorskip("langchain.agents")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
Kill = tuple[str, int]

# One schedule per agent and durability: worker i kills itself the NTH time it reaches
# POINT; each point is reachable whatever the workers before it did (see the worker).
# Together they cover every boundary; "exit" stores no pending writes, so no writes_*.
SCHEDULES: dict[tuple[str, str], list[Kill]] = {
    ("create_agent", "sync"): [
        ("writes_after", 2),
        ("model_answered", 1),
        ("tool_after_effect", 2),
        ("after_journal", 1),
        ("put_before", 1),
    ],
    ("create_agent", "async"): [
        ("writes_before", 3),
        ("model_start", 1),
        ("after_result", 2),
        ("before_intent", 1),
        ("put_after", 1),
    ],
    ("create_agent", "exit"): [
        ("after_result", 4),
        ("model_answered", 1),
        ("put_before", 1),
        ("after_journal", 1),
        ("put_after", 1),
    ],
    ("toolnode", "sync"): [
        ("writes_after", 2),
        ("model_answered", 1),
        ("tool_after_effect", 2),
        ("after_journal", 1),
        ("put_before", 1),
    ],
    ("toolnode", "async"): [
        ("writes_before", 3),
        ("model_start", 1),
        ("tool_start", 2),
        ("after_journal", 1),
        ("put_after", 1),
    ],
    ("toolnode", "exit"): [
        ("tool_after_effect", 4),
        ("model_answered", 1),
        ("put_before", 1),
        ("after_journal", 1),
        ("put_after", 1),
    ],
}


def run_schedule(
    url: str,
    prefix: str,
    effects: str,
    kind: str,
    durability: str,
    mode: str,
    kills: list[Kill],
    held: dict[int, int] | None = None,
) -> None:
    """Start one worker per scheduled kill, then one more that must finish the run.

    With durability "async" LangGraph writes in the background, so how much work a
    killed worker leaves depends on which of its writes landed before the kill: a late
    point of the schedule may lie past the end of what is left (seen under load). Such a
    worker finishes the run instead; the kills before it must have landed, and at least
    two of them. Worker ``n`` in ``held`` lets its first ``held[n]`` checkpoint puts land
    and holds the rest: under "async" its SIGKILL loses every later checkpoint."""
    for n, kill in enumerate([*kills, None]):
        argv = [url, prefix, "t", effects, durability, mode, kind]
        env = {k: v for k, v in os.environ.items() if k != "HOLD_PUTS"}
        if kill is not None:
            argv += [kill[0], str(kill[1])]
            if held and n in held:
                env["HOLD_PUTS"] = str(held[n])
        proc = subprocess.run(
            [sys.executable, "-m", "tests.workers.journal_worker", *argv],
            cwd=ROOT,
            env=env,
            check=False,  # a killed worker is the point
            capture_output=True,
            text=True,
            timeout=300,
        )
        if kill is not None:
            finished = proc.returncode == 0 and "done" in proc.stdout
            if finished and durability == "async" and n >= 2:
                return  # the run is over: nothing was left for the rest of the schedule
            assert proc.returncode == -9, (
                f"worker {n} was to die at {kill} but exited {proc.returncode}:\n"
                f"{proc.stderr[-4000:]}"
            )
        else:
            assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-4000:]


def final_state(url: str, prefix: str, kind: str) -> Any:
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        graph = build(kind, ToolLedger(saver), Effects(os.devnull), saver)
        return graph.get_state({"configurable": {"thread_id": "t"}})


def lost_starts(url: str, prefix: str) -> set[str]:
    """The checkpoints recorded calls started from that were never saved: a crash lost
    them (durability "exit", or "async" steps ahead of its background saves)."""
    config: Any = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        saved = {c.config["configurable"]["checkpoint_id"] for c in saver.list(config)}
        entries = ToolLedger(saver).entries("t")
    return {e.start for e in entries if e.start} - saved


def check_world(state: Any, effects: Effects, exact: bool = True) -> None:
    """The run finished; each effect happened once and belongs to a final call.

    ``exact=False`` (a call was recorded from a checkpoint a crash lost: ``lost_starts``):
    the ledger cannot tell that call's resume from a new run sending the same input
    (ledger/decide.py row 10): the model is asked again and the calls of its new answer
    are asked about beside the recorded ones. The human answers from the effect file
    ("skip": the recorded effect stands), so each final call has one effect, though not
    with its wording."""
    messages = state.values["messages"]
    assert not state.next and not state.tasks and not state.interrupts, state
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls
    assert rounds_in(messages) == ROUNDS
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    lines = effects.lines()
    for tool in TOOLS:
        done = [e for e in lines if e["kind"] == "effect" and e["tool"] == tool]
        keys = Counter(e["key"] for e in done)
        assert None not in keys and all(n == 1 for n in keys.values()), f"{tool}: {done}"
        wanted = sorted(repr(sorted(c["args"].items())) for c in calls if c["name"] == tool)
        got = sorted(repr(sorted(e["args"].items())) for e in done)
        if not exact:
            wanted, got = [len(wanted)], [len(got)]
        assert got == wanted, f"{tool} effects {got} != the final conversation's {wanted}"
    asked = [e for e in lines if e["kind"] == "asked"]
    diverged = [e for e in asked if e["args"]["type"] == "tool_call_diverged"]
    assert not diverged or not exact, f"divergences asked about: {diverged}"
    if exact:
        assert all(e["tool"] in NON_IDEMPOTENT for e in asked), asked  # charge retries alone


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", ["create_agent", "toolnode"])
def test_sigkills_with_a_model_that_answers_differently_repeat_no_effect(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str, durability: str
) -> None:
    kills = SCHEDULES[(kind, durability)]

    def one(mode: str) -> None:
        effects = str(tmp_path / mode)
        prefix = f"{key_prefix}:{mode}"  # under the fixture's prefix: deleted with it
        run_schedule(redis_url, prefix, effects, kind, durability, mode, kills)
        lost = lost_starts(redis_url, prefix)
        if durability == "sync":  # a step starts once the one before it is saved
            assert not lost, f"durability sync lost checkpoints calls started from: {lost}"
        if durability == "exit":  # a killed exit run saves nothing
            assert lost, "no recorded call started from a checkpoint a kill lost"
        check_world(final_state(redis_url, prefix, kind), Effects(effects), exact=not lost)

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, ["sync", "async"]))


@pytest.mark.parametrize("kind", ["create_agent", "toolnode"])
def test_async_checkpoints_a_sigkill_loses_repeat_no_effect(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str
) -> None:
    """Under durability "async" a worker's checkpoints may be in flight when it dies:
    here its puts after the third (the step after the model's first answer) are held, as
    behind a slow Redis, and it is killed at round 1's first tool effect. The model's
    round-1 answer was recorded from a checkpoint no one saved. The next worker resumes
    from the last saved one, makes that step again (another checkpoint), the model is
    asked again, and its new answer's calls are asked about beside the recorded ones
    (decide.py row 10), not run as new: no effect repeats, and the run completes."""
    effects = str(tmp_path / "effects")
    point = "after_result" if kind == "create_agent" else "tool_after_effect"
    kills = [(point, 4)]  # round 0 holds three tool calls
    run_schedule(redis_url, key_prefix, effects, kind, "async", "sync", kills, held={0: 3})
    assert lost_starts(redis_url, key_prefix), "the held puts lost no checkpoint"
    check_world(final_state(redis_url, key_prefix, kind), Effects(effects), exact=False)
    # the round-1 calls recorded before the kill (how many depends on the tools' own
    # threads) are asked about beside the new answer's, or their outcome is unknown
    asked = [e["args"]["type"] for e in Effects(effects).lines() if e["kind"] == "asked"]
    assert "tool_call_diverged" in asked, asked
    assert set(asked) <= {"tool_call_diverged", "tool_outcome_unknown"}, asked


def test_without_the_journal_a_crash_makes_the_model_diverge(
    redis_url: str, key_prefix: str, tmp_path: Any
) -> None:
    """The control: the same crash without journaling re-asks the model, whose new
    answer differs from the calls the ledger recorded, and check_world sees it."""
    effects = str(tmp_path / "effects")
    kind = "toolnode-unjournaled"
    run_schedule(redis_url, key_prefix, effects, kind, "exit", "sync", [("tool_after_effect", 4)])
    with pytest.raises(AssertionError, match="divergences asked about|effects"):
        check_world(final_state(redis_url, key_prefix, kind), Effects(effects))


@pytest.mark.parametrize("kind", ["toolnode-unjournaled", "create_agent-unjournaled"])
def test_under_exit_a_model_that_is_not_journaled_repeats_no_effect(
    redis_url: str, key_prefix: str, tmp_path: Any, kind: str
) -> None:
    """The model answers with fresh ids and wording on every call and nothing journals
    it; every kill under "exit" saves nothing and the same input is sent again. The
    ledger cannot tell that from a new run (ledger/decide.py row 10): it asks about each
    call beside a recorded one instead of running it as new, and no effect repeats."""
    effects = str(tmp_path / "effects")
    kills = SCHEDULES[("toolnode", "exit")]
    run_schedule(redis_url, key_prefix, effects, kind, "exit", "sync", kills)
    assert lost_starts(redis_url, key_prefix)
    check_world(final_state(redis_url, key_prefix, kind), Effects(effects), exact=False)
