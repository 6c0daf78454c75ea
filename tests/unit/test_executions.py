"""The execution rules (ledger/executions.py), case by case, without a server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_durable.ledger.entries import MODEL_POSITION, RESULT, LedgerEntry
from langgraph_durable.ledger.executions import (
    Execution,
    Lineage,
    Now,
    ai_messages,
    choose,
    created_at,
    executions,
    new_name,
    now_of,
    request_digest,
)

NOW = Now(start="cp-2", start_ns="", task_id="task-2", run_id=None, forked=False, attempt=1)


def recorded(name: str = "cp-1", **facts: Any) -> Execution:
    base = Execution(
        name=name,
        start=name.split(".")[0],
        starts=frozenset({name.split(".")[0]}),
        run_id=None,
        void=False,
        newest=1.0,
        request=None,
        call_ids=frozenset(),
        journaled=False,
        legacy=name == "",
    )
    return replace(base, **facts)


def test_the_same_starting_checkpoint_continues_it_even_for_a_fork() -> None:
    mine = recorded("cp-2")
    assert choose([recorded("cp-1"), mine], replace(NOW, forked=True), {"cp-1"}, Lineage()) == mine


def test_a_start_any_attempt_of_it_used_continues_it_across_runs() -> None:
    """A retry of run r1 escalated from checkpoint cp-2; the answer comes as run r2."""
    mine = recorded("cp-1", run_id="r1", starts=frozenset({"cp-1", "cp-2"}))
    assert choose([mine], replace(NOW, run_id="r2"), {"cp-2"}, Lineage()) == mine


def test_a_lost_start_is_not_continued_once_a_checkpoint_was_saved_since() -> None:
    lost = recorded("cp-1", request="abc", newest=10.0)
    assert choose([lost], NOW, set(), Lineage(request="abc"), saved_since=9.0) == lost
    assert choose([lost], NOW, set(), Lineage(request="abc"), saved_since=11.0) is None


def test_a_rolled_back_execution_is_never_continued() -> None:
    void = recorded("cp-2", void=True, run_id="r1")
    assert choose([void], NOW, set(), Lineage()) is None
    assert new_name([void], NOW) == "cp-2.1"  # a new one from the same checkpoint


def test_run_ids_decide_when_both_have_one() -> None:
    same, other = recorded("cp-1", run_id="r1"), recorded("cp-0", run_id="r0")
    now = replace(NOW, run_id="r1", forked=True)
    assert choose([other, same], now, {"cp-1", "cp-0"}, Lineage()) == same
    assert choose([other], replace(now, forked=False), set(), Lineage()) is None


def test_a_fork_starts_a_new_execution() -> None:
    lost = recorded("cp-1")  # even one whose checkpoint was lost
    assert choose([lost], replace(NOW, forked=True), set(), Lineage()) is None


def test_an_execution_whose_checkpoint_is_saved_is_not_continued_from_another() -> None:
    assert choose([recorded("cp-1")], NOW, {"cp-1"}, Lineage()) is None


def test_a_lost_checkpoint_is_continued_by_a_call_on_its_line() -> None:
    lost = recorded("cp-1", request="abc", call_ids=frozenset({"c1"}), journaled=True)
    assert choose([lost], NOW, set(), Lineage(request="abc")) == lost
    assert choose([lost], NOW, set(), Lineage(request="xyz")) is None
    assert choose([lost], NOW, set(), Lineage(call_ids=frozenset({"c1", "c2"}))) == lost
    assert choose([lost], NOW, set(), Lineage(call_ids=frozenset({"c9"}))) is None


def test_unjournaled_tool_calls_are_continued_as_before_executions() -> None:
    """Without a journal a replayed model answers otherwise: asked about, as before."""
    lost = recorded("cp-1", call_ids=frozenset({"c1"}))
    assert choose([lost], NOW, set(), Lineage(call_ids=frozenset({"c9"}))) == lost
    journaled_now = Lineage(call_ids=frozenset({"c9"}), journaled=True)
    assert choose([lost], NOW, set(), journaled_now) is None


def test_entries_without_facts_and_legacy_ones_are_continued() -> None:
    assert choose([recorded("cp-1")], NOW, set(), Lineage(request="abc")) is not None
    legacy = recorded("")
    assert choose([legacy], NOW, {"cp-1"}, Lineage()) == legacy
    assert choose([legacy], replace(NOW, forked=True), set(), Lineage()) is None


def test_the_newest_qualifying_execution_is_taken() -> None:
    old, new = recorded("cp-1", newest=1.0), recorded("cp-0", newest=2.0)
    assert choose([old, new], NOW, set(), Lineage()) == new


def test_executions_sum_up_their_entries() -> None:
    def entry(execution: str, position: int, **kw: Any) -> LedgerEntry:
        return LedgerEntry(
            field=f"{execution}-{position}",
            checkpoint_ns="",
            step=1,
            task="t",
            position=position,
            name="model" if position >= MODEL_POSITION else "charge",
            args_hash="h",
            state=RESULT,
            execution=execution,
            **kw,
        )

    found = executions(
        [
            entry("cp-1", MODEL_POSITION + 1, request="second", run_id="r1"),
            entry("cp-1", MODEL_POSITION, request="first", started_at=5.0),
            entry("cp-2", 0, tool_call_id="c1", journaled=True, run_id="r2"),
        ],
        voided_runs={"r2"},
    )
    one, two = sorted(found, key=lambda x: x.name)
    assert (one.request, one.run_id, one.void, one.newest) == ("first", "r1", False, 5.0)
    assert (two.call_ids, two.journaled, two.void) == (frozenset({"c1"}), True, True)


def test_a_request_digest_leaves_message_ids_out() -> None:
    def conversation(ids: bool) -> list[Any]:
        return [
            HumanMessage("hi", id="h1" if ids else None),
            AIMessage("", tool_calls=[{"name": "x", "args": {"a": 1}, "id": "c1"}], id="a1"),
            ToolMessage("done", tool_call_id="c1"),
        ]

    assert request_digest(conversation(True)) == request_digest(conversation(False))
    other = conversation(True)
    other[0] = HumanMessage("hello")
    assert request_digest(other) != request_digest(conversation(True))
    assert len(request_digest("hi")) == 32  # any input: a string, a prompt value


def test_a_request_digest_reads_a_prompts_variables_without_message_ids() -> None:
    def variables(message_id: str) -> dict[str, Any]:
        return {"messages": [HumanMessage("hi", id=message_id)], "topic": "cats"}

    assert request_digest(variables("a")) == request_digest(variables("b"))
    assert request_digest(variables("a")) != request_digest({**variables("a"), "topic": "dogs"})
    answer = AIMessage("x", id="m1")
    assert ai_messages({"messages": [HumanMessage("hi"), answer]}) == [answer]


def test_a_checkpoint_id_tells_when_it_was_created() -> None:
    import time

    from langgraph.checkpoint.base.id import uuid6

    before = time.time()
    made = created_at(str(uuid6(clock_seq=-2)))
    assert made is not None and before - 1 <= made <= time.time() + 1
    assert created_at("not-a-uuid") is None and created_at(str(uuid4())) is None


def test_now_reads_the_task_config() -> None:
    class Info:
        node_attempt = 2

    class Scratchpad:
        def __init__(self) -> None:
            self.resume = ["yes", "sure"]

        def get_null_resume(self, consume: bool = False) -> Any:
            assert not consume
            return None

    class Runtime:
        execution_info = Info()

    config: Any = {
        "configurable": {
            "checkpoint_ns": "sub:p1|inner:t1",
            "checkpoint_map": {"": "root-cp", "sub:p1": "sub-cp"},
            "__pregel_task_id": "t1",
            "__pregel_runtime": Runtime(),
            "__pregel_replay_state": object(),
            "__pregel_scratchpad": Scratchpad(),
        },
        "metadata": {"run_id": "r9"},
    }
    now = now_of(config)
    assert (now.start, now.start_ns, now.task_id) == ("sub-cp", "sub:p1", "t1")
    assert (now.run_id, now.forked, now.attempt, now.answered) == ("r9", True, 2, 2)
