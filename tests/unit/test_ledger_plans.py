"""The ledger's plans (ledger/calls.py, escalations.py, store.py), plain functions of
the ledger context, driven by hand: the task's one read,
the decision each call makes on it (replay, run, escalate, fail), the intent written
before a call and the result after, every record sealed by the real codec
(``entries.sealed_entry``) and read back through it (``entries.open_entry``)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from redis.exceptions import ResponseError

from langgraph_durable import ToolLedger
from langgraph_durable.core import fencing
from langgraph_durable.core.errors import ToolCallDivergedError, ToolOutcomeUnknownError
from langgraph_durable.core.heads import REPLAYED, ledger_mark
from langgraph_durable.core.keys import LEDGER_RECORD, KeySchema
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.ledger import calls, store
from langgraph_durable.ledger.entries import (
    DAMAGED,
    INTENT,
    RESULT,
    EscalationAnswer,
    LedgerEntry,
    open_entry,
    sealed_entry,
)
from langgraph_durable.ledger.escalations import escalate_inline, prepare_parallel
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.sites import Site, TaskContext, call_site, task_place
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import PREFIX, THREAD, drive, make_core
from tests.unit.scripted_more import checkpoint_id

START = checkpoint_id(1)  # the checkpoint the task attempt started from
WRITE = "batch:ledger_write"


class Saver:
    """What a ledger needs of its saver here: the core (the test drives the plans)."""

    def __init__(self, **options: Any) -> None:
        self.core = make_core(**options)

    def drive(self, plan: Any) -> Any:  # pragma: no cover - the tests drive by hand
        raise AssertionError("plans are driven by the test")

    async def adrive(self, plan: Any) -> Any:  # pragma: no cover
        raise AssertionError("plans are driven by the test")


def make_ledger(*, saver_options: dict[str, Any] | None = None, **options: Any) -> ToolLedger:
    return ToolLedger(Saver(**(saver_options or {})), **options)


def task(ledger: ToolLedger, run_id: str | None = None) -> TaskContext:
    """The context of a task attempt of node "n" at step 1, started from ``START``."""
    config: Any = {
        "configurable": {
            "thread_id": THREAD,
            "checkpoint_ns": "n:6c60b60a-e434-faad-be9f-92a02bc3f22f",
            "checkpoint_map": {"": START},
            "__pregel_task_id": "task-1",
        },
        "metadata": {
            "langgraph_step": 1,
            "langgraph_node": "n",
            "langgraph_path": ["__pregel_pull", "n"],
            **({"run_id": run_id} if run_id else {}),
        },
    }
    place = task_place(ledger.context.keys, config)
    assert place is not None
    return TaskContext(object(), place)


def site_of(ledger: ToolLedger, ctx: TaskContext, amount: int = 5, position: int = 0) -> Site:
    """The call ``charge(amount)`` at ``position`` of the task's execution (``START``'s
    unless the load chose another)."""
    if not ctx.execution:
        ctx.execution = START
    return call_site(
        ledger.context.keys, ctx, "charge", {"amount": amount}, tool_call_id=None, position=position
    )


def entry(site: Site, state: str, **fields: Any) -> LedgerEntry:
    """An entry of ``site``'s call as the task attempt of ``task`` records it."""
    facts: dict[str, Any] = {
        "idempotency_key": site.key,
        "args": site.args,
        "attempts": 1,
        "started_at": 1000.0,
        "task_id": "task-1",
        "start": START,
    }
    return LedgerEntry(field=site.field, **vars(site.where), state=state, **{**facts, **fields})


def read_reply(
    ledger: ToolLedger,
    *entries: LedgerEntry,
    records: dict[str, bytes] | None = None,
    damaged: int = 0,
    unindexed: list[bytes] | None = None,
    voids: list[Any] | None = None,
    marks: list[Any] | None = None,
) -> list[Any]:
    """A ``ledger_read.lua`` reply holding ``entries``, sealed (or ``records[field]``)."""
    flat: list[Any] = []
    for e in entries:
        record = (records or {}).get(e.field) or sealed_entry(ledger.saver.core, THREAD, e)[0]
        flat += [e.field.encode(), record]
    saved = [START.encode()]  # the starting checkpoint is still saved
    return [[], damaged, flat, unindexed or [], saved, voids or [], marks or []]


def load(ledger: ToolLedger, ctx: TaskContext, reply: list[Any], *more: Any) -> list[Any]:
    _, ops = drive(store.load(ledger.context, ctx, Lineage()), ("ledger_read", reply), *more)
    return ops


def written(ledger: ToolLedger, op: Batch) -> list[LedgerEntry]:
    """The entries a ``ledger_write`` call stores, opened as a read would open them."""
    (script,) = [c for c in op.commands if isinstance(c, Script) and c.name == "ledger_write"]
    _, _, n, *rest = script.args
    guards, *rest = rest[2 * n :]
    rest = rest[3 * guards :]
    out = []
    for i in range(0, len(rest), 6):
        field, record, _, _, _, mark = rest[i : i + 6]
        out.append(open_entry(ledger.saver.core, THREAD, field, record, mark or None))
    return out


def test_the_task_is_read_in_one_round_trip_of_its_own_range() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    (op,) = load(ledger, ctx, read_reply(ledger))
    keys, place = ledger.context.keys, ctx.place
    assert op.keys == keys.thread(THREAD).with_twins()
    lower, upper = keys.ledger_task_range(place.prefix)
    assert op.args == [lower, upper, "", place.prefix, "\x00", *keys.ledger_void_range()]
    assert ctx.entries == {} and ctx.execution == START and not ctx.ledger_damaged


def test_a_recorded_result_replays_without_a_round_trip() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    done = entry(site, RESULT, result={"charged": 5}, finished_at=1001.0)
    load(ledger, ctx, read_reply(ledger, done))
    assert ctx.entries[site.field].result == {"charged": 5}
    decision, ops = drive(calls.begin(ledger.context, ctx, site, "escalate"))
    assert ops == [] and decision.replay and decision.value == {"charged": 5}
    assert decision.key == site.key


def test_a_new_call_writes_its_intent_before_it_runs_and_its_result_after() -> None:
    ledger = make_ledger(saver_options={"ttl": 60})
    ctx = task(ledger, run_id="r1")
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    decision, (begin,) = drive(calls.begin(ledger.context, ctx, site, "escalate"), (WRITE, [1]))
    assert not decision.replay and decision.key == site.key
    (intent,) = written(ledger, begin)
    assert (intent.state, intent.attempts, intent.idempotency_key) == (INTENT, 1, site.key)
    assert intent.args == {"amount": 5} and intent.damage is None
    assert (intent.task_id, intent.start, intent.run_id) == ("task-1", START, "r1")
    assert intent.worker == fencing.this_worker(), "who wrote it: the timeline names it"
    script = begin.commands[0]
    assert script.args[:5] == [60, "", 1, KeySchema.ledger_run_member("r1"), "r1"]
    # the run's index learns the thread in the same round trip (a rollback finds it)
    assert begin.ahead[0] == ("SADD", ledger.context.keys.run("r1"), THREAD)
    _, (finish,) = drive(
        calls.finish(ledger.context, site, decision, RESULT, result={"charged": 5}), (WRITE, [1])
    )
    (result,) = written(ledger, finish)
    assert (result.state, result.result, result.attempts) == (RESULT, {"charged": 5}, 1)
    assert result.finished_at is not None and result.idempotency_key == site.key


def test_an_intent_is_written_only_over_the_record_it_was_decided_from() -> None:
    """A read served by a stale server (a demoted primary) found no record; the server
    written to holds the call's result: the intent is refused, the task read again,
    and the result replayed."""
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    done = entry(site, RESULT, result={"charged": 5})
    decision, (refused, _) = drive(
        calls.begin(ledger.context, ctx, site, "retry"),
        (WRITE, [site.field.encode()]),
        ("ledger_read", read_reply(ledger, done)),
    )
    args = refused.commands[0].args
    assert args[2:6] == [0, 1, site.field, ""], "expects no record"
    (intent,) = written(ledger, refused)
    assert args[6] == hashlib.sha1(sealed_entry(ledger.saver.core, THREAD, intent)[0]).hexdigest()
    assert decision.replay and decision.value == {"charged": 5}


def test_an_intent_over_an_earlier_attempt_expects_that_record() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    load(ledger, ctx, read_reply(ledger, entry(site, INTENT)))
    seen = ctx.entries[site.field].seen
    _, (begin,) = drive(calls.begin(ledger.context, ctx, site, "retry"), (WRITE, [1]))
    assert seen and begin.commands[0].args[3:6] == [1, site.field, seen]


def test_an_intent_refused_twice_is_an_unknown_outcome() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    with pytest.raises(ToolOutcomeUnknownError, match="changed twice"):
        drive(
            calls.begin(ledger.context, ctx, site, "retry"),
            (WRITE, [site.field.encode()]),
            ("ledger_read", read_reply(ledger)),
            (WRITE, [site.field.encode()]),
        )


def test_an_escalation_is_written_only_over_the_record_it_was_decided_from() -> None:
    """The read found an intent (an unknown outcome); the call finished since: the
    question is refused, the task read again, and nothing is asked."""
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    intent = entry(site, INTENT)
    done = entry(site, RESULT, result={"charged": 5})
    found, _ = drive(
        escalate_inline(ledger.context, _loaded(ledger, ctx, intent), site, "escalate"),
        (WRITE, [site.field.encode()]),
        ("ledger_read", read_reply(ledger, done)),
    )
    assert found is None and ctx.entries[site.field].state == RESULT


def test_a_tool_task_numbers_its_questions_again_when_one_is_refused() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    calls_ = [{"name": "charge", "args": {"amount": 5}, "id": None}]
    intent, done = entry(site, INTENT), entry(site, RESULT, result={"charged": 5})
    asked, ops = drive(
        prepare_parallel(ledger.context, ctx, calls_, Lineage()),
        ("ledger_read", read_reply(ledger, intent)),
        (WRITE, [site.field.encode()]),
        ("ledger_read", read_reply(ledger, done)),
    )
    assert ops[1].commands[0].args[3:6] == [1, site.field, sealed_sha(ledger, intent)]
    assert asked == [] and ctx.entries[site.field].state == RESULT


def sealed_sha(ledger: ToolLedger, e: LedgerEntry) -> str:
    return hashlib.sha1(sealed_entry(ledger.saver.core, THREAD, e)[0]).hexdigest()


def _loaded(ledger: ToolLedger, ctx: TaskContext, *entries: LedgerEntry) -> TaskContext:
    load(ledger, ctx, read_reply(ledger, *entries))
    return ctx


def test_writes_in_a_lease_carry_its_token() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    binding = fencing.bind(PREFIX, THREAD, "31")
    try:
        _, (begin,) = drive(
            calls.begin(ledger.context, ctx, site_of(ledger, ctx), "retry"), (WRITE, [1])
        )
    finally:
        fencing.unbind(binding)
    assert begin.commands[0].args[1] == "31"


@pytest.mark.parametrize("policy", ["escalate", "fail"])
def test_an_intent_without_a_result_stops_under_escalate_and_fail(policy: str) -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    load(ledger, ctx, read_reply(ledger, entry(site, INTENT)))
    with pytest.raises(ToolOutcomeUnknownError) as raised:
        drive(calls.begin(ledger.context, ctx, site, policy))  # nothing written, nothing run
    assert raised.value.idempotency_key == site.key
    assert "between its intent and its result" in raised.value.reason


@pytest.mark.parametrize("policy", ["retry", "readonly"])
def test_an_intent_without_a_result_runs_again_under_the_same_key(policy: str) -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    recorded = entry(site, INTENT, attempts=2, idempotency_key="lgd-as-recorded")
    load(ledger, ctx, read_reply(ledger, recorded))
    decision, (begin,) = drive(calls.begin(ledger.context, ctx, site, policy), (WRITE, [1]))
    assert not decision.replay and decision.key == "lgd-as-recorded", "the key it ran under"
    (intent,) = written(ledger, begin)
    assert intent.state == INTENT and intent.attempts == 3
    assert intent.idempotency_key == "lgd-as-recorded"


def test_escalate_numbers_the_question_then_applies_a_humans_answer() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    load(ledger, ctx, read_reply(ledger, entry(site, INTENT)))
    asked, (numbered,) = drive(escalate_inline(ledger.context, ctx, site, "escalate"), (WRITE, [1]))
    (stored,) = written(ledger, numbered)
    assert (stored.escalation, stored.escalations) == (0, (0,)) and stored.state == INTENT
    assert asked is not None and asked.escalation == 0
    # asked once: a replay of the task asks the same question, writing nothing
    again, ops = drive(escalate_inline(ledger.context, ctx, site, "escalate"))
    assert again == asked and ops == []
    # "skip": the human says it took effect; its output is recorded, the call not run
    ctx.answers[site.field] = EscalationAnswer(action="skip", result={"charged": 5})
    decision, (skip,) = drive(calls.begin(ledger.context, ctx, site, "escalate"), (WRITE, [1]))
    (done,) = written(ledger, skip)
    assert decision.replay and decision.value == {"charged": 5}
    assert (done.state, done.resolution, done.result) == (RESULT, "skip", {"charged": 5})
    # "retry" runs it again; "fail" raises, saying a human chose it
    ctx.answers[site.field] = EscalationAnswer(action="retry")
    decision, (retry,) = drive(calls.begin(ledger.context, ctx, site, "escalate"), (WRITE, [1]))
    assert not decision.replay and written(ledger, retry)[0].resolution == "retry"
    ctx.answers[site.field] = EscalationAnswer(action="fail")
    with pytest.raises(ToolOutcomeUnknownError, match="a human chose to fail it"):
        drive(calls.begin(ledger.context, ctx, site, "escalate"))


def test_a_damaged_record_is_an_unknown_outcome_and_goes_to_quarantine_when_replaced() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    done = entry(site, RESULT, result="paid")
    record = flipped(sealed_entry(ledger.saver.core, THREAD, done)[0])
    load(ledger, ctx, read_reply(ledger, done, records={site.field: record}))
    found = ctx.entries[site.field]
    assert found.state == DAMAGED and found.outcome_unknown and "checksum" in found.damage
    with pytest.raises(ToolOutcomeUnknownError, match="its ledger record is damaged"):
        drive(calls.begin(ledger.context, ctx, site, "fail"))
    _, (begin,) = drive(calls.begin(ledger.context, ctx, site, "retry"), (WRITE, [1]))
    guards, guarded, sha = begin.commands[0].args[3:6]
    assert (guards, guarded) == (1, site.field) and sha, "decided from the damaged record"
    field, _, qfield, reason = begin.commands[0].args[7:11]
    assert field == site.field
    assert qfield == ledger.context.keys.quarantine_field(LEDGER_RECORD, site.field)
    assert reason == found.damage, "the damaged bytes are kept, with why"


def test_a_ledger_ever_damaged_makes_a_call_without_an_entry_an_unknown_outcome() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger, damaged=1))
    assert ctx.ledger_damaged
    with pytest.raises(ToolOutcomeUnknownError, match="ledger of this thread was damaged"):
        drive(calls.begin(ledger.context, ctx, site_of(ledger, ctx), "retry"))


def test_an_older_record_written_back_escalates_whatever_the_policy() -> None:
    """Signed: each entry's mark names its newest record. The intent of a call that
    finished, written back over its result, no longer matches: never run again."""
    ledger = make_ledger(saver_options={"signing_key": b"k" * 32})
    core = ledger.saver.core
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    intent = entry(site, INTENT)
    _, result_body = sealed_entry(core, THREAD, entry(site, RESULT, result="paid"))
    _, mark = ledger_mark(core.envelope, THREAD, site.field, result_body)
    load(ledger, ctx, read_reply(ledger, intent, marks=[site.field.encode(), mark]))
    assert ctx.entries[site.field].damage == REPLAYED
    with pytest.raises(ToolOutcomeUnknownError):
        drive(calls.begin(ledger.context, ctx, site, "retry"))
    # the mark of the record read: no damage
    _, intent_body = sealed_entry(core, THREAD, intent)
    _, mark = ledger_mark(core.envelope, THREAD, site.field, intent_body)
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger, intent, marks=[site.field.encode(), mark]))
    assert ctx.entries[site.field].damage is None


def test_a_signed_write_carries_the_mark_of_the_record_it_writes() -> None:
    ledger = make_ledger(saver_options={"signing_key": b"k" * 32})
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    _, (begin,) = drive(calls.begin(ledger.context, ctx, site, "retry"), (WRITE, [1]))
    args = begin.commands[0].args
    mark_field = args[11]  # after the guard: (1, field, "", its record's SHA-1)
    assert mark_field == "\x01\x03lg\x00" + site.field
    (intent,) = written(ledger, begin)  # opened with its mark: it matches
    assert intent.state == INTENT and intent.damage is None


def test_entries_the_index_lost_are_read_and_put_back() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    done = entry(site, RESULT, result="paid")
    ops = load(
        ledger,
        ctx,
        read_reply(ledger, done, unindexed=[site.field.encode()]),
        ("ledger_write", 1),
    )
    reindex = ops[1]
    assert isinstance(reindex, Script) and reindex.args[:3] == [0, "", 0]
    assert reindex.args[4:] == [site.field.encode(), "", "", "", "", ""], "an empty record"
    assert ctx.entries[site.field].state == RESULT


def test_a_different_call_at_a_recorded_place_diverged() -> None:
    ledger = make_ledger(on_divergence="raise")
    ctx = task(ledger)
    recorded = site_of(ledger, ctx, amount=5)
    load(ledger, ctx, read_reply(ledger, entry(recorded, RESULT, result="paid")))
    other = site_of(ledger, ctx, amount=6)  # the model asked otherwise this time
    with pytest.raises(ToolCallDivergedError) as raised:
        drive(calls.begin(ledger.context, ctx, other, "retry"))
    assert raised.value.recorded_args == {"amount": 5}
    assert raised.value.requested_args == {"amount": 6}
    # "new_call": it runs as a call of its own, under its own key
    ledger = make_ledger(on_divergence="new_call")
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger, entry(recorded, RESULT, result="paid")))
    decision, (begin,) = drive(calls.begin(ledger.context, ctx, other, "retry"), (WRITE, [1]))
    assert decision.key == other.key != recorded.key
    assert written(ledger, begin)[0].args == {"amount": 6}


def test_a_rolled_back_runs_result_never_answers_a_later_call() -> None:
    ledger = make_ledger()
    core = ledger.saver.core
    ctx = task(ledger)
    site = site_of(ledger, ctx)
    done = entry(site, RESULT, result="paid", run_id="r1")
    void_field = KeySchema.ledger_void_field("r1")
    void = core.envelope.seal(
        KeySchema.identity(LEDGER_RECORD, THREAD, void_field),
        msgpack.packb({"v": 1, "at": 1.0, "why": "rolled back"}),
    )
    voids = [void_field.encode(), void]
    load(ledger, ctx, read_reply(ledger, done, voids=voids))
    assert ctx.execution == f"{START}.1", "a new execution from the same checkpoint"
    place = ctx.place  # what operators see (entries(), escalations): the run rolled back
    read, _ = drive(
        store.read(
            ledger.context,
            THREAD,
            ledger.context.keys.ledger_task_range(place.prefix),
            place.prefix,
            "\x00",
        ),
        ("ledger_read", read_reply(ledger, done, voids=voids)),
    )
    assert [e.rolled_back for e in read.entries] == [True] and read.voided == {"r1"}
    assert ctx.entries == {}
    fresh = site_of(ledger, ctx)
    decision, (_begin,) = drive(calls.begin(ledger.context, ctx, fresh, "escalate"), (WRITE, [1]))
    assert not decision.replay and fresh.key != site.key
    # a void record that does not verify voids nothing (a forgery could only un-void)
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger, done, voids=[void_field.encode(), flipped(void)]))
    assert ctx.execution == START and ctx.entries[site.field].state == RESULT


def test_a_failed_write_is_raised_not_taken_for_a_begun_call() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    plan = calls.begin(ledger.context, ctx, site, "retry")
    op = plan.send(None)
    assert isinstance(op, Batch) and not op.errors_as_values, "a refusal raises"
    with pytest.raises(ResponseError):
        plan.throw(ResponseError("LGD_FENCED 5 7"))


def test_settled_model_answers_ride_with_the_intent_they_led_to() -> None:
    ledger = make_ledger()
    ctx = task(ledger)
    load(ledger, ctx, read_reply(ledger))
    site = site_of(ledger, ctx)
    answer = replace(
        entry(site_of(ledger, ctx, position=5_000_000), RESULT, result="model says charge"),
        seen="0" * 40,
    )
    ctx.unsettled = [answer]
    _, (begin,) = drive(
        calls.begin(ledger.context, ctx, site, "retry"), (WRITE + ",ledger_settle", [1, 1])
    )
    write, settle = begin.commands
    assert (write.name, settle.name) == ("ledger_write", "ledger_settle")
    field, seen, record = settle.args[2:5]
    assert (field, seen) == (answer.field, "0" * 40), "written only over the record it read"
    assert open_entry(ledger.saver.core, THREAD, field, record).settled
    assert ctx.unsettled == []
