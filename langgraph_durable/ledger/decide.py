"""The one decision: is a call the recorded one again, a new call, or a question?

Owns the rule every recorded call is judged by, when a task reaches a place (namespace,
superstep, node and path, position) where another attempt recorded a call:

    replay only what is provably the same execution and the same request;
    run as new only what is provably another execution;
    ask about everything else.

It takes explicit facts (``Facts``; ``store.py`` and ``sites.py`` gather them from the
run's config and the thread's records) and returns ``REPLAY``, ``NEW`` or ``ASK`` with the
row that decided. No I/O, no LangGraph. The rows, first match wins:

====  ==========================================  =========================  ==========
row   fact                                        same request               other
====  ==========================================  =========================  ==========
1     its run was rolled back (delete_for_runs)   NEW                        NEW
2     a sibling: this process recorded it under   NEW                        NEW
      another parent task (a fan-out)
3     time travel to the checkpoint it started    ASK                        ASK
      from (LangGraph re-runs that very task)
4     time travel, and it started from a saved    NEW                        NEW
      checkpoint (a fork, a regenerate)
5     the task's interrupts were answered         ASK                        NEW
      otherwise than when it was recorded
6     a tool call from the very AI message the    REPLAY                     ASK
      recorded call came from (message and
      tool-call ids), no time travel
7     the same LangGraph task: it started from a  REPLAY                     ASK
      checkpoint the recorded attempts started
      from (a crash resume, an answered
      interrupt, a RetryPolicy retry)
8     both runs have ids, and they differ         NEW                        NEW
9     both runs have ids, and they are equal, no  REPLAY                     ASK
      time travel (LangGraph Server retrying a run)
10    anything else (its start was never saved:   ASK                        ASK
      ``exit``, a lost ``async`` checkpoint; no
      run ids; the same input sent again; a
      checkpoint saved since it last recorded;
      another start, its own still saved)
====  ==========================================  =========================  ==========

The request is compared before anything is replayed: a tool call's name and arguments; a
model call's messages and tools (row 5 covers the resume values it was given). What
ASK means is the caller's: for a tool call the tool's policy and ``on_divergence`` decide
(by default a human, through ``interrupt()``); a model call has no side effects, so the
model is asked again, and the tool calls of its new answer are judged by this table.

Why the rows are proofs:
  * 1, 2: a rollback, and two tasks of one process running side by side, are never one
    execution.
  * 3, 4: time travel asks LangGraph to run again; from a saved checkpoint that is a new
    branch. Re-addressing the very checkpoint the task started from re-runs the same task
    id, which LangGraph cannot tell from a resume: asked.
  * 5: a human who answers an interrupt differently steers the task onto another branch:
    its other calls are new; the same call again may be the effect the human wants or the
    one already done, so it is asked.
  * 6: an AI message's id is unique per answer (LangChain's chat models and LangGraph give
    one to every message), so a call from the same message is the decision already
    executed, however LangGraph reached it again (an answered interrupt re-sent to its
    checkpoint, a checkpoint edited under it).
  * 7: LangGraph derives a task's id from the checkpoint it starts from: the same start is
    the same task, resumed.
  * 8, 9: run ids name runs (LangGraph Server keeps a run's id across its retries).
  * 10: what is left cannot be told apart; LangGraph itself cannot. A checkpoint saved
    after the recorded execution's last record shows that some line went on, but not
    that it is another line than the one this task is on (an ``exit`` run that stopped
    at an interrupt saved the very checkpoint this task resumes from). A recorded start
    that is still saved, where this task started elsewhere, shows this is no crash
    resume, not that it is another execution: an answered interrupt re-sent to its
    checkpoint runs the node again (a model that is not journaled then answers anew,
    maybe in other words), and an edit with ``update_state`` reaches the same place too.
    Both are asked about, not run as new.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Answer(str, Enum):
    """What a call does at a place where another attempt recorded one."""

    REPLAY = "replay"  # the recorded outcome is this call's
    NEW = "new"  # another execution: run it as a new call (its own idempotency key)
    ASK = "ask"  # cannot be proven either way: the policy and on_divergence decide


@dataclass(frozen=True)
class Facts:
    """What is known of a recorded execution and the call now, each a proven fact."""

    rolled_back: bool = False  # the recorded run was rolled back
    sibling: bool = False  # recorded by this process under another parent task
    forked: bool = False  # the call's run travels back in time
    same_start: bool = False  # the call's task started where a recorded attempt did
    resume_changed: bool = False  # its interrupts were answered otherwise
    same_decision: bool = False  # a tool call from the AI message the recorded one came from
    recorded_run: str | None = None
    run: str | None = None
    start_saved: bool = False  # the recorded execution's starting checkpoint is saved
    same_request: bool = False  # tool: name and arguments; model: messages and tools


@dataclass(frozen=True)
class Verdict:
    """The answer and the row of the table that gave it."""

    answer: Answer
    row: int
    why: str


def decide(facts: Facts) -> Verdict:
    """The table's answer for ``facts`` (module docstring)."""
    f = facts
    same = f.same_request
    if f.rolled_back:
        return Verdict(Answer.NEW, 1, "its run was rolled back")
    if f.sibling:
        return Verdict(Answer.NEW, 2, "a task beside it in this process recorded it")
    if f.forked and f.same_start:
        return Verdict(Answer.ASK, 3, "time travel re-runs the task that recorded it")
    if f.forked and f.start_saved:
        return Verdict(Answer.NEW, 4, "a fork from a saved checkpoint")
    if f.resume_changed:
        if same:
            return Verdict(Answer.ASK, 5, "its interrupt was answered otherwise")
        return Verdict(Answer.NEW, 5, "its interrupt was answered otherwise: another branch")
    if f.same_decision and not f.forked:
        return _same(same, 6, "made from the same AI message")
    if f.same_start and not f.forked:
        return _same(same, 7, "the same LangGraph task")
    if f.recorded_run and f.run:
        if f.recorded_run != f.run:
            return Verdict(Answer.NEW, 8, "another run")
        if not f.forked:
            return _same(same, 9, "the same run")
    return Verdict(Answer.ASK, 10, "no fact tells: no run ids, no shared start or AI message")


def _same(same_request: bool, row: int, why: str) -> Verdict:
    if same_request:
        return Verdict(Answer.REPLAY, row, why)
    return Verdict(Answer.ASK, row, f"{why}, but another request")


def execution_of(facts: Facts) -> Answer:
    """Whether the recorded execution is this call's (REPLAY), another (NEW) or unknown
    (ASK), before any request is compared: the table with the request taken as equal."""
    verdict = decide(Facts(**{**vars(facts), "same_request": True}))
    return verdict.answer
