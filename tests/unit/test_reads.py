"""Reads and fallback, driven by hand: what a plan asks for, and what it makes of replies."""

from __future__ import annotations

import pytest

from langgraph_durable.core.errors import CheckpointCorruptedError, UnreadableThreadError
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.core.records import Damage
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import THREAD, Thread, config, drive, make_core


def test_get_tuple_of_a_thread_it_wrote_is_one_round_trip() -> None:
    core = make_core()
    thread = Thread(core)
    newest = thread.checkpoint(1, {"messages": ["hi"]})
    # First read: the values are read after the record (two round trips)...
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["channel_values"] == {"messages": ["hi"]}
    assert len(ops) == 2
    # ...the second guesses them and reads them with the record: one round trip.
    tup, ops = drive(
        core.get_tuple(config()),
        (
            "batch:read_checkpoints,HMGET",
            lambda op: [
                thread.read_reply(thread.entry(newest)),
                *thread.hmget(Batch(op.commands[1:])),
            ],
        ),
    )
    assert tup.config["configurable"]["checkpoint_id"] == newest and len(ops) == 1


def test_a_damaged_newest_checkpoint_is_skipped_quarantined_and_reported() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"messages": ["old"]})
    newest = thread.checkpoint(2, {"messages": ["new"]}, parent=older)
    damaged = flipped(thread.records[thread.member(newest)])
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest, damaged))),
        ("batch:quarantine", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(older))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["channel_values"] == {"messages": ["old"]}
    quarantine = ops[1].commands[0]
    assert quarantine.name == "quarantine"
    assert [quarantine.args[i] for i in (1, 2, 4)] == [
        "cp",
        thread.member(newest),
        "checksum mismatch",
    ]
    report = core.recovery_reports[(THREAD, "")]
    assert [s.checkpoint_id for s in report.skipped] == [newest]
    assert report.used_checkpoint_id == older and report.recovered_from_step == 1
    # The second page starts below the skipped checkpoint.
    assert ops[2].args[0] == "range" and ops[2].args[1] < ops[0].args[1]


def test_a_reader_that_may_not_write_skips_damage_without_moving_it() -> None:
    core = make_core(repair_on_read=False)
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest, b"garbage"))),
        ("read_checkpoints", thread.read_reply(thread.entry(older))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["channel_values"] == {"x": 1}
    assert not any("quarantine" in str(op) for op in ops)


def test_records_this_reader_cannot_verify_are_an_error_never_an_empty_thread() -> None:
    writer = make_core(signing_key=b"k" * 32)
    thread = Thread(writer)
    only = thread.checkpoint(1, {"x": 1})
    reader = make_core(signing_key=b"other key, not the writer's")
    with pytest.raises(UnreadableThreadError, match="bad signature"):
        drive(
            reader.get_tuple(config()),
            # a signed reader reads the namespace's head with its newest (heads.py)
            ("batch:read_checkpoints,HGET", [thread.read_reply(thread.entry(only)), None]),
            # no quarantine: the reader's key may be what is wrong, not the record
            ("read_checkpoints", thread.read_reply()),
        )


def test_a_named_checkpoint_that_is_damaged_raises_instead_of_falling_back() -> None:
    core = make_core()
    thread = Thread(core)
    only = thread.checkpoint(1, {"x": 1})
    with pytest.raises(CheckpointCorruptedError, match="checksum mismatch"):
        drive(
            core.get_tuple(config(only)),
            (
                "read_checkpoints",
                thread.read_reply(thread.entry(only, flipped(thread.records[thread.member(only)]))),
            ),
            ("batch:quarantine", [1]),
        )


def test_an_index_that_lost_members_is_rebuilt_and_read_again() -> None:
    core = make_core()
    thread = Thread(core)
    only = thread.checkpoint(1, {"x": 1})
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(unindexed=[b"unit:{t}:cps"])),
        ("batch:reindex", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(only))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup is not None and tup.checkpoint["id"] == only
    reindex = ops[1].commands[0]
    assert isinstance(reindex, Script) and reindex.keys == core.keys.thread(THREAD).with_twins()


def test_a_missing_channel_value_is_rechecked_before_it_counts_as_damage() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    tup, _ = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply(thread.entry(newest))),
        ("batch:HMGET", lambda op: [[None]]),  # the value is not there...
        ("recheck_values", [[0], [None]]),  # ...because retention deleted the checkpoint
        ("read_checkpoints", thread.read_reply(thread.entry(older))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["channel_values"] == {"x": 1}
    assert core.recovery_reports.get((THREAD, "")) is None, "a deletion is no damage"


@pytest.mark.parametrize(
    ("reason", "kind", "configuration"),
    [
        ("missing", Damage.MISSING, False),
        ("missing record", Damage.MISSING_RECORD, False),
        ("checksum mismatch channel value 'x'@1", Damage.CHECKSUM_MISMATCH, False),
        ("bad signature: signed with an unknown key", Damage.BAD_SIGNATURE, True),
        ("refused type os.system (not in the msgpack allowlist)", Damage.REFUSED, True),
        ("unknown format version 1 (accept_format_1=False)", Damage.UNKNOWN_FORMAT, True),
        ("sibling of a damaged write: truncated", Damage.OTHER, False),
    ],
)
def test_every_reason_reads_back_as_its_kind(
    reason: str, kind: Damage, configuration: bool
) -> None:
    assert Damage.of(reason) is kind
    assert kind.may_be_configuration is configuration
    assert f"{kind}" == kind.value, "a kind reads as its text in logs and reports"


def test_an_index_member_this_saver_cannot_have_written_leaves_the_index() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    tup, ops = drive(
        core.get_tuple(config()),
        ("read_checkpoints", thread.read_reply([b"not a member", None, [], 1])),
        ("batch:quarantine", [1]),
        ("read_checkpoints", thread.read_reply(thread.entry(older))),
        ("batch:HMGET", thread.hmget),
    )
    assert tup.checkpoint["id"] == older
    move = ops[1].commands[0].args
    assert move[1:3] == ["cp", b"not a member"] and move[4] == Damage.MALFORMED_MEMBER
    assert ops[2].args[1] < ops[0].args[1], "the next page starts below the bad member"
