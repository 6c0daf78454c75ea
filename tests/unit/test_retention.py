"""Retention (core/retention.py), driven by hand: which checkpoints ``keep_last`` lets go
(``prunable``), and the guarded deletion that removes them with the values no remaining
checkpoint references, voided when the thread's write generation moved."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from redis.exceptions import ResponseError

from langgraph_durable.core import codec
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.core.records import PLAN_RETRIES, DecodedCheckpoint
from langgraph_durable.core.retention import prunable
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import THREAD, config, drive, make_core
from tests.unit.scripted_more import Store, checkpoint_id

PLAN = "batch:GET,HGETALL,HKEYS,HKEYS"  # the generation first, then what may go


def decoded(store: Store) -> dict[str, DecodedCheckpoint]:
    """The thread's checkpoints as retention decodes them from ``HGETALL cp``."""
    out = {}
    for member, record in store.hgetall_cp().items():
        d = codec.decode_entry(store.core, store.tk, [member, record, []])
        assert isinstance(d, DecodedCheckpoint)
        out[d.member] = d
    return out


def chain(store: Store, steps: int, ns: str = "", **metadata_at: dict[str, Any]) -> list[str]:
    """``steps`` checkpoints of ``ns``, each the parent of the next, channel "x" new in
    each and channel "k" kept from the first; ``metadata_at["s3"]`` is step 3's."""
    ids: list[str] = []
    for step in range(1, steps + 1):
        ids.append(
            store.checkpoint(
                step,
                {"x": step, **({"k": "kept"} if step == 1 else {})},
                keep={"k": 1} if step > 1 else None,
                ns=ns,
                parent=ids[-1] if ids else None,
                metadata=metadata_at.get(f"s{step}"),
            )
        )
    return ids


def delete_args(op: Script) -> dict[str, Any]:
    """``delete_checkpoints.lua``'s arguments by name (unsigned: no head updates)."""
    ttl, generation, n, *rest = op.args
    doomed, (b, *rest) = rest[:n], rest[n:]
    garbage, (heads, *loose) = rest[:b], rest[b:]
    return {
        "ttl": ttl,
        "generation": generation,
        "doomed": doomed,
        "garbage": garbage,
        "heads": heads,
        "loose": loose,
    }


# -- prunable ---------------------------------------------------------------------------
def test_each_namespace_keeps_its_own_newest() -> None:
    store = Store(make_core())
    root = chain(store, 5)
    sub = chain(store, 3, ns="child:1")
    doomed = prunable(decoded(store), 2, set())
    assert doomed == {store.member(c) for c in root[:3]} | {store.member(sub[0], "child:1")}


def test_the_ancestors_a_delta_channel_is_rebuilt_from_are_kept() -> None:
    """counters_since_delta_snapshot (updates, supersteps): the seed lies that many
    supersteps up the parent chain; retention keeps one more, never fewer."""
    store = Store(make_core())
    ids = chain(store, 8, s8={"counters_since_delta_snapshot": {"messages": (1, 2)}})
    doomed = prunable(decoded(store), 1, set())
    assert doomed == {store.member(c) for c in ids[:4]}, "kept: 8 and 7, 6, 5"
    # the largest counter of any channel decides
    store = Store(make_core())
    counters = {"a": (1, 0), "b": (4, 4)}
    ids = chain(store, 8, s8={"counters_since_delta_snapshot": counters})
    assert prunable(decoded(store), 1, set()) == {store.member(c) for c in ids[:2]}


def test_unreadable_delta_counters_keep_the_whole_chain(caplog: pytest.LogCaptureFixture) -> None:
    store = Store(make_core())
    chain(store, 5, s5={"counters_since_delta_snapshot": {"messages": "not a pair"}})
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        assert prunable(decoded(store), 1, set()) == set()
    assert "keeps every ancestor" in caplog.text


def test_a_pinned_checkpoint_and_its_delta_ancestors_are_kept() -> None:
    store = Store(make_core())
    ids = chain(store, 6, s3={"counters_since_delta_snapshot": {"m": (0, 0)}})
    pinned = {store.member(ids[2])}  # the newest that verifies: the fallback
    doomed = prunable(decoded(store), 1, pinned)
    assert doomed == {store.member(c) for c in (ids[0], ids[3], ids[4])}, "2 is 3's seed"


def test_a_chain_broken_by_a_missing_parent_stops_the_walk() -> None:
    store = Store(make_core())
    ids = chain(store, 4, s4={"counters_since_delta_snapshot": {"m": (9, 9)}})
    gone = store.member(ids[1])
    del store.cp[gone]  # deleted or damaged: not among the decoded
    assert prunable(decoded(store), 1, set()) == {store.member(ids[0])}


# -- the prune plan ---------------------------------------------------------------------
def prune_script(store: Store, generation: bytes) -> tuple[str, Any]:
    return (PLAN, [generation, store.hgetall_cp(), [f.encode() for f in store.bl], []])


def drive_prune(core: Any, keep_last: int, script: list[tuple[str, Any]]) -> tuple[Any, list[Any]]:
    return drive(core.prune([THREAD], keep_last=keep_last), *script)


def test_prune_deletes_the_oldest_and_the_values_only_they_reference() -> None:
    core = make_core(ttl=30)
    store = Store(core)
    ids = chain(store, 4)
    tk = store.tk
    ledger = [
        core.keys.ledger_field(core.keys.ledger_task(ns, step, "[node]"), "", 0, "tool", "h")
        for ns, step in (("", 2), ("", 3), ("", 4), ("sub|inner", 1))
    ]
    _, ops = drive_prune(
        core,
        keep_last=2,
        script=[
            prune_script(store, b"1700000000000042"),
            ("batch:HMGET", store.hmget),  # the newest verifies: it is pinned
            ("delete_checkpoints", 2),
            ("ledger_read", [[], 0, [f.encode() for f in ledger], [], [], [], []]),
            ("ledger_delete", 2),
        ],
    )
    plan, pin, delete, _, forget = ops
    assert plan.errors_as_values and plan.commands[0] == ("GET", tk.gen)
    assert pin.commands == [("HMGET", tk.bl, *sorted(store.fields_of(ids[3])))]
    args = delete_args(delete)
    assert args["ttl"] == 30 and args["generation"] == b"1700000000000042"
    assert args["doomed"] == sorted(store.member(c) for c in ids[:2])
    x1, x2 = (core.keys.blob_field("", "x", f"{n:032}.0") for n in (1, 2))
    assert args["garbage"] == [x1.encode(), x2.encode()], "k@1 is still referenced"
    assert args["heads"] == 0 and args["loose"] == []
    assert delete.keys == tk.with_twins()
    # The ledger entries of root steps up to the oldest left (3) can never replay again;
    # a subgraph's steps count in the subgraph: kept.
    assert forget.args == [30, ledger[0].encode(), ledger[1].encode()]


def test_a_deletion_planned_under_an_older_generation_is_planned_again() -> None:
    """delete_checkpoints.lua answers -1 when the generation moved since the plan (a put
    may name a value planned away): the plan is made again from what is there now."""
    core = make_core()
    store = Store(core)
    ids = chain(store, 3)
    before = dict(store.cp)
    newer = store.checkpoint(4, {"x": 4}, keep={"k": 1}, parent=ids[-1])  # written meanwhile
    after = dict(store.cp)
    store.cp = before
    first = prune_script(store, b"100")
    store.cp = after
    _, ops = drive_prune(
        core,
        keep_last=2,
        script=[
            first,
            ("batch:HMGET", store.hmget),
            ("delete_checkpoints", -1),  # a put came between: void
            prune_script(store, b"101"),
            ("batch:HMGET", store.hmget),
            ("delete_checkpoints", 2),
            ("ledger_read", [[], 0, [], [], [], [], []]),
        ],
    )
    voided, made_again = delete_args(ops[2]), delete_args(ops[5])
    assert voided["generation"] == b"100" and voided["doomed"] == [store.member(ids[0])]
    x4 = core.keys.blob_field("", "x", f"{4:032}.0").encode()
    assert x4 in voided["garbage"], "the put's value, not yet named: why the guard is there"
    assert x4 not in made_again["garbage"]
    assert made_again["generation"] == b"101"
    assert made_again["doomed"] == sorted(store.member(c) for c in ids[:2])
    assert store.member(newer) not in made_again["doomed"]
    assert not any(isinstance(op, Script) and op.name == "ledger_delete" for op in ops)


def test_a_thread_that_keeps_being_written_is_given_up(caplog: pytest.LogCaptureFixture) -> None:
    core = make_core()
    store = Store(core)
    chain(store, 3)
    round_ = [prune_script(store, b"7"), ("batch:HMGET", store.hmget), ("delete_checkpoints", -1)]
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        _, ops = drive_prune(core, keep_last=1, script=round_ * PLAN_RETRIES)
    assert len(ops) == 3 * PLAN_RETRIES, "no ledger cleanup for a deletion that never ran"
    assert "gave up pruning thread" in caplog.text


def test_nothing_to_delete_is_one_read_and_no_script() -> None:
    core = make_core()
    store = Store(core)
    chain(store, 2)
    _, ops = drive_prune(
        core, keep_last=2, script=[prune_script(store, b"1"), ("batch:HMGET", store.hmget)]
    )
    assert len(ops) == 2


def test_the_newest_that_verifies_is_pinned_past_keep_last() -> None:
    core = make_core()
    store = Store(core)
    ids = chain(store, 4)
    x4 = core.keys.blob_field("", "x", f"{4:032}.0")
    del store.bl[x4]  # the newest's value is gone: a read falls back to 3
    _, ops = drive_prune(
        core,
        keep_last=1,
        script=[
            prune_script(store, b"9"),
            ("batch:HMGET", store.hmget),  # 4: a value missing
            ("batch:HMGET", store.hmget),  # 3: verifies, pinned
            ("delete_checkpoints", 2),
            ("ledger_read", [[], 0, [], [], [], [], []]),
        ],
    )
    assert ops[2].commands == [("HMGET", store.tk.bl, *sorted(store.fields_of(ids[2])))]
    args = delete_args(ops[3])
    assert args["doomed"] == sorted(store.member(c) for c in ids[:2]), "4 and 3 stay"


def test_a_damaged_record_keeps_every_value_and_is_never_deleted_by_retention() -> None:
    core = make_core()
    store = Store(core)
    ids = chain(store, 4)
    oldest = store.member(ids[0])
    store.cp[oldest] = flipped(store.cp[oldest])
    _, ops = drive_prune(
        core,
        keep_last=2,
        script=[
            prune_script(store, b"5"),
            ("batch:HMGET", store.hmget),
            ("delete_checkpoints", 1),
            ("ledger_read", [[], 0, [], [], [], [], []]),
        ],
    )
    args = delete_args(ops[2])
    assert args["doomed"] == [store.member(ids[1])], "damage is for quarantine, not retention"
    assert args["garbage"] == [], "what the damaged record referenced is unknown"


def test_elements_only_doomed_values_name_go_with_them() -> None:
    core = make_core()
    store = Store(core)
    old = ["old message " + "o" * 80, "shared message " + "s" * 80]
    new = ["shared message " + "s" * 80, "new message " + "n" * 80]
    c1 = store.checkpoint(1, {"messages": old})
    c2 = store.checkpoint(2, {"messages": new}, parent=c1)
    assert len(store.el) == 3, "elements stored once each, the shared one too"
    digests = sorted(store.el)
    kept_field = store.fields_of(c2)[0]
    _, ops = drive_prune(
        core,
        keep_last=1,
        script=[
            (PLAN, [b"3", store.hgetall_cp(), [f.encode() for f in store.bl], digests]),
            ("batch:HMGET", store.hmget),  # pin: the newest's manifest...
            ("batch:HMGET", store.hmget),  # ...and the elements it names, from Redis
            ("batch:HGETALL,HMGET", [store.hgetall_wr(), [store.bl[kept_field]]]),
            ("delete_checkpoints", 1),
            ("ledger_read", [[], 0, [], [], [], [], []]),
        ],
    )
    assert ops[3].commands[1] == ("HMGET", store.tk.bl, kept_field)
    args = delete_args(ops[4])
    assert args["doomed"] == [store.member(c1)]
    old_only = codec.manifest_of(
        core, THREAD, store.fields_of(c1)[0], store.bl[store.fields_of(c1)[0]]
    )
    still_named = codec.manifest_of(core, THREAD, kept_field, store.bl[kept_field])
    assert set(args["loose"]) == set(old_only) - set(still_named) and len(args["loose"]) == 1


def test_an_unreadable_value_keeps_every_element() -> None:
    core = make_core()
    store = Store(core)
    c1 = store.checkpoint(1, {"messages": ["a" * 100, "b" * 100]})
    c2 = store.checkpoint(2, {"messages": ["c" * 100, "d" * 100]}, parent=c1)
    kept_field = store.fields_of(c2)[0]
    _, ops = drive_prune(
        core,
        keep_last=1,
        script=[
            (PLAN, [b"3", store.hgetall_cp(), [f.encode() for f in store.bl], sorted(store.el)]),
            ("batch:HMGET", store.hmget),
            ("batch:HMGET", store.hmget),
            ("batch:HGETALL,HMGET", [{}, [None]]),  # the kept manifest vanished meanwhile
            ("delete_checkpoints", 1),
            ("ledger_read", [[], 0, [], [], [], [], []]),
        ],
    )
    assert ops[3].commands[1] == ("HMGET", store.tk.bl, kept_field)
    assert delete_args(ops[4])["loose"] == [], "it might have named any of them"


def test_a_put_past_keep_last_collects_in_the_same_plan() -> None:
    """Amortized: a put whose namespace holds more than keep_last + max(4, keep_last/4)
    checkpoints runs the collection after its write; one that holds fewer does not."""
    core = make_core(keep_last=1)
    store = Store(core)
    ids = chain(store, 6)

    def put(in_namespace: int, *then: tuple[str, Any]) -> list[Any]:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id(7)
        checkpoint["channel_versions"] = {"x": "7.0"}
        checkpoint["channel_values"] = {"x": 7}
        plan = core.put(config(ids[-1]), checkpoint, {"step": 7}, {"x": "7.0"})
        _, ops = drive(plan, ("batch:put_checkpoint", [in_namespace]), *then)
        return ops

    assert len(put(5)) == 1, "1 + 4 checkpoints: not yet"
    ops = put(
        6,
        prune_script(store, b"8"),
        ("batch:HMGET", store.hmget),
        ("delete_checkpoints", 5),
        ("ledger_read", [[], 0, [], [], [], [], []]),
    )
    assert delete_args(ops[3])["doomed"] == sorted(store.member(c) for c in ids[:5])
    assert isinstance(ops[1], Batch)


def test_a_thread_without_a_generation_or_with_a_damaged_one_is_planned_at_nothing() -> None:
    """No generation (a new thread, its key evicted) plans at "": a write since sets one
    and voids the deletion. One of the wrong type plans at "" too (the script moves it
    aside first), and so does a values hash of the wrong type, keeping every value."""
    wrong = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    core = make_core()
    store = Store(core)
    ids = chain(store, 3)
    fields = [f.encode() for f in store.bl]
    for generation, blob_fields, garbage in [
        (None, fields, 1),
        (wrong, fields, 1),
        (b"12", wrong, 0),
    ]:
        _, ops = drive_prune(
            core,
            keep_last=2,
            script=[
                (PLAN, [generation, store.hgetall_cp(), blob_fields, []]),
                ("batch:HMGET", store.hmget),
                ("delete_checkpoints", 1),
                ("ledger_read", [[], 0, [], [], [], [], []]),
            ],
        )
        args = delete_args(ops[2])
        assert args["generation"] == (b"12" if generation == b"12" else b"")
        assert args["doomed"] == [store.member(ids[0])]
        assert len(args["garbage"]) == garbage
