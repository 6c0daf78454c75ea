"""``get_tuple``'s fallback (core/fallback.py), driven by hand: the newest checkpoint that
verifies, what is skipped on the way, what is reported and what is moved aside.

``test_reads.py`` covers the first skip, a reader that may not write, a reader without
the writer's key and a damaged checkpoint asked for by id; these cover the rest."""

from __future__ import annotations

import logging
from typing import Any

import msgpack
import pytest

from langgraph_durable.core import codec
from langgraph_durable.core.errors import CheckpointCorruptedError, UnreadableThreadError
from langgraph_durable.core.heads import sealed_head
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.core.records import Damage
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import THREAD, Thread, config, drive, drive_noting, make_core


def damaged(thread: Thread, checkpoint_id: str) -> bytes:
    return flipped(thread.records[thread.member(checkpoint_id)])


def moves(op: Batch) -> list[tuple[Any, ...]]:
    """The (kind, field, quarantine field, reason) quadruples of a quarantine batch."""
    (script,) = op.commands
    assert isinstance(script, Script) and script.name == "quarantine"
    args = script.args[1:]
    return [tuple(args[i : i + 4]) for i in range(0, len(args), 4)]


def test_a_newest_that_verifies_is_returned_without_a_report_and_guessed_next_time() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2, "y": "why"}, parent=older)
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == newest
    assert tup.checkpoint["channel_values"] == {"x": 2, "y": "why"}
    assert tup.parent_config["configurable"]["checkpoint_id"] == older
    assert tup.metadata == {"step": 2}
    # one checkpoint asked for, the newest of the namespace
    assert ops[0].args[0] == "range" and ops[0].args[-1] == 1
    assert (THREAD, "") not in core.recovery_reports
    # The next read guesses exactly the newest's values: one round trip, nothing else.
    _, (batch,) = drive(
        core.get_tuple(config()),
        (
            "batch:read_checkpoints,HMGET",
            lambda op: [
                thread.read_reply(thread.entry(newest)),
                *thread.hmget(Batch(op.commands[1:])),
            ],
        ),
    )
    (_, _, *fields) = batch.commands[1]
    assert sorted(fields) == sorted(f for f in thread.values if f.endswith("2.0")), (
        "the guess is the newest checkpoint's values, no other"
    )


def test_two_damaged_checkpoints_are_skipped_in_order_each_moved_aside() -> None:
    core = make_core()
    thread = Thread(core)
    oldest = thread.checkpoint(1, {"x": 1})
    middle = thread.checkpoint(2, {"x": 2}, parent=oldest)
    newest = thread.checkpoint(3, {"x": 3}, parent=middle)
    tup, ops, notes = drive_noting(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest, damaged(thread, newest)))),
        ("batch:quarantine", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(middle, b"not a record at all"))),
        ("batch:quarantine", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(oldest))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == oldest and tup.checkpoint["channel_values"] == {"x": 1}
    # What the operation's span shows: each record moved aside, each damage, the fallback.
    assert [n.event for n in notes] == [
        "lgd.quarantine",
        "lgd.record.damaged",
        "lgd.quarantine",
        "lgd.record.damaged",
        "lgd.fallback",
    ]
    assert notes[1].attributes["lgd.checkpoint_id"] == newest
    assert notes[-1].attributes["lgd.used_checkpoint_id"] == oldest
    assert notes[-1].attributes["lgd.skipped_count"] == 2
    assert [m[:2] for m in moves(ops[1])] == [("cp", thread.member(newest))]
    assert [m[:2] for m in moves(ops[3])] == [("cp", thread.member(middle))]
    report = core.recovery_reports[(THREAD, "")]
    assert [s.checkpoint_id for s in report.skipped] == [newest, middle]
    assert [Damage.of(s.reason) for s in report.skipped] == [
        Damage.CHECKSUM_MISMATCH,
        Damage.NOT_A_RECORD,
    ]
    assert report.fell_back and report.used_checkpoint_id == oldest
    assert report.recovered_from_step == 1
    # Each page starts below the checkpoint skipped last: the bounds only go down.
    uppers = [op.args[1] for op in ops if isinstance(op, Script)]
    assert uppers == sorted(uppers, reverse=True) and len(set(uppers)) == 3
    assert uppers[1].endswith(newest) and uppers[2].endswith(middle)


def test_an_indexed_checkpoint_whose_record_is_gone_leaves_the_index_as_missing_record() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    lost = [thread.member(newest).encode(), None, [], 1]  # read_checkpoints.lua: lost = 1
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(lost)),
        ("batch:quarantine", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(older))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == older
    # quarantine.lua takes the member out of the index: no later read walks it again
    ((kind, member, qfield, reason),) = moves(ops[1])
    assert (kind, member, reason) == ("cp", thread.member(newest), Damage.MISSING_RECORD)
    assert qfield == core.keys.quarantine_field("cp", thread.member(newest))
    (skipped,) = core.recovery_reports[(THREAD, "")].skipped
    assert skipped.checkpoint_id == newest and Damage.of(skipped.reason) is Damage.MISSING


def test_every_checkpoint_damaged_is_none_reported_and_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        tup, _ops = drive(
            core.get_tuple(config()),
            ("read_checkpoints", thread.read_reply(thread.entry(newest, damaged(thread, newest)))),
            ("batch:quarantine", [1]),
            ("read_checkpoints", thread.read_reply(thread.entry(older, damaged(thread, older)))),
            ("batch:quarantine", [1]),
            ("read_checkpoints", thread.read_reply()),  # nothing left below
        )
    assert tup is None, "damage, not configuration: the thread starts again"
    report = core.recovery_reports[(THREAD, "")]
    assert [s.checkpoint_id for s in report.skipped] == [newest, older]
    assert report.used_checkpoint_id is None and report.recovered_from_step is None
    assert any(
        r.levelno == logging.ERROR and "starts again from step 0" in r.getMessage()
        for r in caplog.records
    )


def test_one_skip_that_may_be_configuration_makes_an_empty_fallback_an_error() -> None:
    """Damage below a record signed with a key this reader lacks: the reader may be what
    is wrong, so it raises instead of starting the thread again from step 0."""
    reader = make_core(signing_key=b"r" * 32)
    thread = Thread(reader)
    older = thread.checkpoint(1, {"x": 1})
    foreign = Thread(make_core(signing_key=b"s" * 32))  # a key the reader does not hold
    newest = foreign.checkpoint(2, {"x": 2}, parent=older)
    _, head = sealed_head(reader.envelope, THREAD, "", older)  # the reader's newest
    with pytest.raises(UnreadableThreadError) as raised:
        drive(
            reader.get_tuple(config()),
            ("batch:read_checkpoints,HGET", [thread.read_reply(foreign.entry(newest)), head]),
            # no quarantine for a bad signature; the next page at once
            ("read_checkpoints", thread.read_reply(thread.entry(older, b"garbage"))),
            ("batch:quarantine", [1]),  # the damage is moved aside
            ("read_checkpoints", thread.read_reply()),
        )
    reasons = raised.value.reasons
    assert set(reasons) == {newest, older}
    assert Damage.of(reasons[newest]) is Damage.BAD_SIGNATURE
    assert Damage.of(reasons[older]) is Damage.NOT_A_RECORD
    skipped = reader.recovery_reports[(THREAD, "")].skipped
    assert [s.checkpoint_id for s in skipped] == [newest, older]


def test_a_damaged_pending_write_drops_its_whole_task_and_is_reported() -> None:
    core = make_core()
    thread = Thread(core)
    only = thread.checkpoint(1, {"x": 1})
    keys = core.keys

    def write(task: str, idx: int, channel: str, value: Any) -> tuple[bytes, bytes]:
        member = keys.write_member("", only, "path", task, idx)
        record, _ = codec.write_record(core, THREAD, member, channel, value, "a write", False)
        return member.encode(), record

    bad_member, bad = write("t1", 0, "a", "first")
    sibling_member, sibling = write("t1", 1, "b", "second")
    kept_member, kept = write("t2", 0, "c", "other task")
    entry = thread.entry(only)
    entry[2] = [bad_member, flipped(bad), sibling_member, sibling, kept_member, kept]
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(entry)),
        ("batch:HMGET", thread.hmget),
        ("batch:quarantine", [2]),
    )
    assert tup.checkpoint["id"] == only
    assert tup.pending_writes == [("t2", "c", "other task")], "t1 runs again as a whole"
    quarantined = {m[1]: m[3] for m in moves(ops[2])}
    assert set(quarantined) == {bad_member.decode(), sibling_member.decode()}
    assert Damage.of(quarantined[bad_member.decode()]) is Damage.CHECKSUM_MISMATCH
    assert quarantined[sibling_member.decode()].startswith("sibling of a damaged write")
    report = core.recovery_reports[(THREAD, "")]
    assert not report.skipped and not report.fell_back
    assert [d.checkpoint_id for d in report.dropped_writes] == [only]
    assert report.used_checkpoint_id == only


def test_a_named_checkpoint_not_stored_is_none_unless_the_quarantine_holds_it() -> None:
    core = make_core()
    thread = Thread(core)
    gone = thread.checkpoint(1, {"x": 1})
    not_there = [thread.member(gone).encode(), None, [], 0]  # members mode, not indexed
    tk = core.keys.thread(THREAD)
    qfield = core.keys.quarantine_field("cp", thread.member(gone))
    tup, ops = drive(
        core.get_tuple(config(gone)),
        ("read_checkpoints", thread.read_reply(not_there)),
        ("HGET", None),
    )
    assert tup is None, "never stored, or deleted: no damage"
    assert ops[0].args == ["members", thread.member(gone)]
    assert ops[1].args == ("HGET", tk.qt, qfield)
    # An earlier read moved it aside: the quarantine entry (quarantine.lua) says why.
    entry = msgpack.packb(["checksum mismatch", b"the bytes"])
    with pytest.raises(CheckpointCorruptedError) as raised:
        drive(
            core.get_tuple(config(gone)),
            ("read_checkpoints", thread.read_reply(not_there)),
            ("HGET", entry),
        )
    assert raised.value.reason == "quarantined: checksum mismatch"
    assert raised.value.checkpoint_id == gone


def test_a_stale_signed_head_is_reported_though_the_newest_left_is_returned() -> None:
    core = make_core(signing_key=b"k" * 32)
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    removed = thread.checkpoint(2, {"x": 2}, parent=older)  # its record and member gone
    _, head = sealed_head(core.envelope, THREAD, "", removed)
    tup, ops = drive(
        core.get_tuple(config()),
        ("batch:read_checkpoints,HGET", [thread.read_reply(thread.entry(older)), head]),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == older, "a head is a lower bound, never the only truth"
    assert ops[0].commands[1] == ("HGET", core.keys.thread(THREAD).head, "")
    (skipped,) = core.recovery_reports[(THREAD, "")].skipped
    assert skipped.checkpoint_id == removed and Damage.of(skipped.reason) is Damage.MISSING
    assert skipped.key == core.keys.thread(THREAD).head


@pytest.mark.parametrize(
    ("head", "says"),
    [(None, "missing: the signed head"), (b"LD-not-a-head", "(signed head)")],
)
def test_a_signed_namespace_without_a_good_head_is_reported(head: Any, says: str) -> None:
    core = make_core(signing_key=b"k" * 32)
    thread = Thread(core)
    only = thread.checkpoint(1, {"x": 1})
    tup, _ = drive(
        core.get_tuple(config()),
        ("batch:read_checkpoints,HGET", [thread.read_reply(thread.entry(only)), head]),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == only
    (skipped,) = core.recovery_reports[(THREAD, "")].skipped
    assert says in skipped.reason and skipped.checkpoint_id == ""


def test_a_head_naming_the_checkpoint_read_or_an_older_one_is_no_finding() -> None:
    core = make_core(signing_key=b"k" * 32)
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    for named in (newest, older):
        _, head = sealed_head(core.envelope, THREAD, "", named)
        tup, _ = drive(
            core.get_tuple(config()),
            ("batch:read_checkpoints,HGET", [thread.read_reply(thread.entry(newest)), head]),
            ("batch:HMGET", thread.hmget),
        )
        assert tup.checkpoint["id"] == newest
        core.newest_versions.forget(THREAD)  # the next read has no guess either
        assert (THREAD, "") not in core.recovery_reports
    # An empty signed namespace has no head and reads as new.
    nothing, _ = drive(
        core.get_tuple(config()), ("batch:read_checkpoints,HGET", [thread.read_reply(), None])
    )
    assert nothing is None and (THREAD, "") not in core.recovery_reports


def test_refresh_on_read_refreshes_a_thread_found_and_leaves_a_new_one_alone() -> None:
    core = make_core(ttl=60, refresh_on_read=True)
    thread = Thread(core)
    only = thread.checkpoint(1, {"x": 1})
    _, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(only))),
        ("batch:HMGET", thread.hmget),
        ("refresh", 1),
    )
    assert ops[-1].args == [60] and ops[-1].keys == core.keys.thread(THREAD).all()
    _, ops = drive(  # without refresh_on_read, a read writes nothing
        make_core(ttl=60).get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(only))),
        ("batch:HMGET", thread.hmget),
    )
    assert len(ops) == 2
    nothing, ops = drive(
        make_core(ttl=60, refresh_on_read=True).get_tuple(config()),
        ("read_checkpoints", thread.read_reply()),
    )
    assert nothing is None and len(ops) == 1


def test_a_shallow_saver_returns_its_newest_without_a_parent() -> None:
    core = make_core()
    core.newest_only = True
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    tup, ops = drive(
        core.get_tuple(config(older)),  # whatever id is asked: its one checkpoint
        ("read_checkpoints", thread.read_reply(thread.entry(newest))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == newest and tup.parent_config is None
    assert ops[0].args[0] == "range"
