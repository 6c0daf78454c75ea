"""verify --repair, driven by hand: what it moves, what it leaves, and in which order."""

from __future__ import annotations

from typing import Any

from langgraph_durable.core.repair import repair
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import THREAD, Thread, drive, make_core

VERIFY = "batch:ZRANGE,HGETALL,ZRANGE,HGETALL,HGETALL,HLEN,HGETALL,HGETALL"
WRITES = "batch:ZRANGE,HKEYS"


def verify_reply(thread: Thread, *, cp_index: list[str], cps: dict[str, bytes]) -> list[Any]:
    """The verify batch's replies: cps index, cp hash, wix, wr hash, bl hash, quarantine
    size, elements, heads."""
    return [[m.encode() for m in cp_index], cps, [], {}, dict(thread.values), 0, {}, {}]


def test_repair_quarantines_damage_then_reindexes_what_is_intact() -> None:
    core = make_core()
    thread = Thread(core)
    older = thread.checkpoint(1, {"x": 1})
    newest = thread.checkpoint(2, {"x": 2}, parent=older)
    damaged, unindexed = thread.member(newest), thread.member(older)
    cps = {damaged: flipped(thread.records[damaged]), unindexed: thread.records[unindexed]}
    report, _ = drive(
        repair(core, THREAD),
        (VERIFY, verify_reply(thread, cp_index=[damaged], cps=cps)),
        (WRITES, [[], []]),
        ("quarantine", 1),
        ("reindex", 1),  # after the quarantine: damage is never indexed again
    )
    assert report.moved == [("cp", damaged, "checksum mismatch")]
    assert report.reindexed == 1 and report.left == []


def test_repair_leaves_what_may_be_the_readers_configuration() -> None:
    writer = make_core(signing_key=b"w" * 32)
    thread = Thread(writer)
    member = thread.member(thread.checkpoint(1, {"x": 1}))
    reader = make_core(signing_key=b"r" * 32)
    report, _ = drive(
        repair(reader, THREAD),
        (VERIFY, verify_reply(thread, cp_index=[member], cps=dict(thread.records))),
        (WRITES, [[], []]),  # and nothing else: no quarantine, no reindex
    )
    assert report.moved == [] and report.left
    assert all("bad signature" in why for _, _, why in report.left)


def test_a_thread_without_findings_is_one_round_trip() -> None:
    core = make_core()
    thread = Thread(core)
    member = thread.member(thread.checkpoint(1, {"x": 1}))
    report, ops = drive(
        repair(core, THREAD),
        (VERIFY, verify_reply(thread, cp_index=[member], cps=dict(thread.records))),
    )
    assert report.moved == [] and len(ops) == 1
