"""The execution rules (ledger/executions.py), case by case, without a server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_durable.ledger.entries import MODEL_POSITION, RESULT, LedgerEntry
from langgraph_durable.ledger.executions import (
    Execution,
    Lineage,
    Now,
    ai_messages,
    executions,
    judge,
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


def same(
    found: list[Execution],
    now: Now = NOW,
    saved: set[str] | None = None,
    lineage: Lineage | None = None,
) -> Execution | None:
    return judge(found, now, saved or set(), lineage or Lineage()).same


def unsure(
    found: list[Execution],
    now: Now = NOW,
    saved: set[str] | None = None,
    lineage: Lineage | None = None,
) -> list[Execution]:
    return judge(found, now, saved or set(), lineage or Lineage()).unsure


def test_the_same_starting_checkpoint_continues_it_but_not_under_time_travel() -> None:
    mine = recorded("cp-2")
    assert same([recorded("cp-1"), mine], saved={"cp-1"}) == mine
    assert same([mine], replace(NOW, forked=True), {"cp-2"}) is None
    assert unsure([mine], replace(NOW, forked=True), {"cp-2"}) == [mine]  # row 3


def test_a_start_any_attempt_of_it_used_continues_it_across_runs() -> None:
    """A retry of run r1 escalated from checkpoint cp-2; the answer comes as run r2."""
    mine = recorded("cp-1", run_id="r1", starts=frozenset({"cp-1", "cp-2"}))
    assert same([mine], replace(NOW, run_id="r2"), {"cp-2"}) == mine


def test_a_rolled_back_execution_is_never_continued() -> None:
    void = recorded("cp-2", void=True, run_id="r1")
    assert same([void]) is None and unsure([void]) == []
    assert new_name([void], NOW) == "cp-2.1"  # a new one from the same checkpoint


def test_run_ids_decide_when_both_have_one() -> None:
    mine, other = recorded("cp-1", run_id="r1"), recorded("cp-0", run_id="r0")
    now = replace(NOW, run_id="r1")
    assert same([other, mine], now) == mine
    assert unsure([other], now) == []


def test_a_fork_from_a_saved_checkpoint_is_new_and_from_a_lost_one_asked() -> None:
    assert unsure([recorded("cp-1")], replace(NOW, forked=True), {"cp-1"}) == []
    lost = recorded("cp-1")
    assert unsure([lost], replace(NOW, forked=True)) == [lost]


def test_an_execution_whose_checkpoint_is_saved_is_asked_about_from_another_start() -> None:
    """Not a crash resume (that would start from its saved start), but no proof of
    another execution either: an answered interrupt re-sent to its checkpoint, an edit."""
    assert same([recorded("cp-1")], saved={"cp-1"}) is None
    assert unsure([recorded("cp-1")], saved={"cp-1"}) == [recorded("cp-1")]


def test_a_call_from_the_same_ai_message_continues_it_whatever_else() -> None:
    """decide.py row 6: an answered interrupt re-sent to its checkpoint, in another run."""
    mine = recorded("cp-1", run_id="r1", message_ids=frozenset({"m1"}))
    now = replace(NOW, run_id="r2")
    assert same([mine], now, {"cp-1"}, Lineage(message_id="m1")) == mine
    assert same([mine], now, {"cp-1"}, Lineage(message_id="m2")) is None


def test_a_lost_start_without_run_ids_is_asked_about_never_new() -> None:
    """Under exit, or after an async checkpoint was lost: the ledger cannot tell."""
    lost = recorded("cp-1", request="abc", call_ids=frozenset({"c1"}))
    for lineage in (Lineage(request="abc"), Lineage(request="xyz"), Lineage()):
        assert same([lost], lineage=lineage) is None
        assert unsure([lost], lineage=lineage) == [lost]


def test_an_interrupt_answered_otherwise_is_another_branch() -> None:
    mine = recorded("cp-2", resumes=("q1",))
    assert same([mine], replace(NOW, resumes=("q1", "more"))) == mine
    assert same([mine], replace(NOW, resumes=("q2",))) is None
    assert unsure([mine], replace(NOW, resumes=("q2",))) == [mine]  # row 5, same request


def test_siblings_of_one_superstep_are_other_executions() -> None:
    """Two subgraph tasks started from one parent checkpoint (a fan-out)."""
    sibling = recorded("sub-a", parents=(("root-cp", "sub:a"),))
    now = replace(NOW, start="sub-b", parents=(("root-cp", "sub:b"),), run_id="r")
    assert unsure([replace(sibling, run_id="r")], now) == []
    assert same([replace(sibling, run_id="r")], now) is None
    resumed = replace(now, parents=(("root-cp2", "sub:b"),))  # exit: a new root checkpoint
    assert same([replace(sibling, run_id="r")], resumed) == replace(sibling, run_id="r")


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
    assert len(now.resumes) == 2 and now.resumes[0] != now.resumes[1]
    assert now.parents == (("root-cp", "sub:p1"),)


def test_a_place_keeps_no_task_id_at_any_depth() -> None:
    """decide.py rows need a place that survives exit: enclosing tasks are named by their
    node and the step of the checkpoint they started from, never by their task id."""
    from langgraph.checkpoint.base.id import uuid6

    from langgraph_durable.ledger.sites import checkpoint_step, stable_namespace

    root, sub = str(uuid6(clock_seq=4)), str(uuid6(clock_seq=1))
    cmap = {"": root, "agent:t1": sub}
    assert stable_namespace("agent:t1|tools:t2", cmap) == "agent@4|tools"
    again = {"": str(uuid6(clock_seq=4)), "agent:t9": str(uuid6(clock_seq=1))}
    assert stable_namespace("agent:t9|tools:t8", again) == "agent@4|tools"
    deep = {**cmap, "agent:t1|inner:t3": str(uuid6(clock_seq=0))}
    assert stable_namespace("agent:t1|inner:t3|tools:t4", deep) == "agent@4|inner@1|tools"
    assert stable_namespace("agent:t1|tools:t2", {"": "not-a-uuid"}) == "agent:t1|tools"
    assert stable_namespace("tools:t2", {}) == "tools" and stable_namespace("", {}) == ""
    assert checkpoint_step(str(uuid6(clock_seq=-1))) == -1
