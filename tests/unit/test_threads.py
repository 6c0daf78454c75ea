"""Whole-thread plans (core/threads.py), driven by hand: ``delete_thread``,
``copy_thread``, ``prune``'s strategies and ``delete_for_runs`` with the run index."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from redis.exceptions import ResponseError

from langgraph_durable.core.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.core.heads import REPLAYED, head_checkpoint, ledger_mark
from langgraph_durable.core.keys import LEDGER_RECORD, KeySchema
from langgraph_durable.core.ledger_rollback import voided_runs
from langgraph_durable.core.ops import ScanKeys, Script
from langgraph_durable.ledger.entries import RESULT, LedgerEntry, open_entry, sealed_entry
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import PREFIX, THREAD, config, drive, make_core
from tests.unit.scripted_more import Store, read_reply

WRONGTYPE = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
COPY_READ = "batch:" + ",".join(["HGETALL"] * 6 + ["PTTL", "HGETALL", "ZRANGE", "ZRANGE"])
COLLECT = "batch:GET,HGETALL,HKEYS,HKEYS"
NO_LEDGER = ("ledger_read", [[], 0, [], [], [], [], []])


# -- delete_thread ------------------------------------------------------------------------
def test_delete_thread_unlinks_every_key_and_leaves_its_runs_sets() -> None:
    core = make_core()
    tk = core.keys.thread(THREAD)
    void = KeySchema.ledger_void_field("r3").encode()
    _, (read, leave) = drive(
        core.delete_thread(THREAD),
        ("batch:HVALS,ZRANGEBYLEX,UNLINK", [[b"r1", b"r2", b"r1"], [void], 14]),
        ("batch:", None),
    )
    assert read.commands[0] == ("HVALS", tk.runs)
    assert read.commands[2] == ("UNLINK", *tk.with_twins()), "twins and quarantine too"
    assert read.commands[1] == ("ZRANGEBYLEX", tk.lgx, *core.keys.ledger_void_range())
    # the runs of its checkpoints, and the run it rolled back (whose members are gone)
    assert leave.commands == []
    assert leave.ahead == tuple(("SREM", core.keys.run(r), THREAD) for r in ("r1", "r2", "r3"))


def test_delete_thread_without_runs_is_one_round_trip_and_forgets_its_guess() -> None:
    core = make_core()
    store = Store(core)
    only = store.checkpoint(1, {"x": 1})
    drive(  # a read: the next one would guess the values with the record
        core.get_tuple(config()),
        ("read_checkpoints", read_reply(store.entry(only))),
        ("batch:HMGET", store.hmget),
    )
    _, ops = drive(
        core.delete_thread(THREAD), ("batch:HVALS,ZRANGEBYLEX,UNLINK", [[], WRONGTYPE, 3])
    )
    assert len(ops) == 1, "a damaged ledger index is no reason to fail or write"
    _, (first,) = drive(core.get_tuple(config()), ("read_checkpoints", read_reply()))
    assert isinstance(first, Script), "no stale guess of a deleted thread's values"


def test_delete_thread_raises_when_the_unlink_fails() -> None:
    core = make_core()
    with pytest.raises(ResponseError, match="READONLY"):
        drive(
            core.delete_thread(THREAD),
            ("batch:HVALS,ZRANGEBYLEX,UNLINK", [[b"r1"], [], ResponseError("READONLY no")]),
        )


@pytest.mark.parametrize(("strategy", "keep_last"), [("delete", None), ("keep_latest", 0)])
def test_prune_keeping_nothing_deletes_the_threads(strategy: str, keep_last: Any) -> None:
    core = make_core()
    _, ops = drive(
        core.prune(["a", "b"], strategy=strategy, keep_last=keep_last),
        ("batch:HVALS,ZRANGEBYLEX,UNLINK", [[], [], 1]),
        ("batch:HVALS,ZRANGEBYLEX,UNLINK", [[], [], 1]),
    )
    assert [op.commands[2][1] for op in ops] == [
        core.keys.thread(t).with_twins()[0] for t in ("a", "b")
    ]


@pytest.mark.parametrize(
    ("strategy", "keep_last"), [("newest", None), ("keep_latest", -1), ("delete", True)]
)
def test_prune_refuses_what_it_cannot_keep(strategy: str, keep_last: Any) -> None:
    with pytest.raises(ConfigurationError):
        next(make_core().prune(["a"], strategy=strategy, keep_last=keep_last))


# -- copy_thread --------------------------------------------------------------------------
def copy_reply(
    store: Store,
    *,
    ttl: int = -1,
    lg: dict[bytes, bytes] | None = None,
    heads: dict[bytes, bytes] | None = None,
) -> list[Any]:
    return [
        store.hgetall_cp(),
        store.hgetall_wr(),
        store.hgetall_bl(),
        {m.encode(): b"r1" for m in list(store.cp)[:1]},  # the first checkpoint's run
        lg or {},
        dict(store.el),
        ttl,
        heads or {},
        [m.encode() for m in store.cp],
        [m.encode() for m in store.wr],
    ]


def restored(op: Script) -> dict[str, Any]:
    """``restore_records.lua``'s arguments by name."""
    ttl, r, *rest = op.args
    runs, (h, *rest) = rest[: 2 * r], rest[2 * r :]
    heads, (c, w, lg, b, *rest) = rest[: 2 * h], rest[2 * h :]
    cps, rest = rest[: 3 * c], rest[3 * c :]
    wrs, rest = rest[: 2 * w], rest[2 * w :]
    lgs, rest = rest[: 2 * lg], rest[2 * lg :]
    bls, els = rest[: 2 * b], rest[2 * b :]
    return {
        "ttl": ttl,
        "runs": runs,
        "heads": dict(zip(heads[0::2], heads[1::2])),
        "cps": {m: (rec, run) for m, rec, run in zip(cps[0::3], cps[1::3], cps[2::3])},
        "wrs": dict(zip(wrs[0::2], wrs[1::2])),
        "lgs": dict(zip(lgs[0::2], lgs[1::2])),
        "bls": dict(zip(bls[0::2], bls[1::2])),
        "els": dict(zip(els[0::2], els[1::2])),
    }


def opens(core: Any, kind: str, thread_id: str, field: str, record: bytes) -> bool:
    try:
        core.envelope.open(KeySchema.identity(kind, thread_id, field), record)
    except RecordDamagedError:
        return False
    return True


def test_copy_thread_reseals_what_verifies_for_the_target_and_leaves_damage_out() -> None:
    core = make_core(ttl=120)
    store = Store(core, "src")
    c1 = store.checkpoint(1, {"x": 1, "messages": ["m" * 100, "n" * 100]})
    c2 = store.checkpoint(2, {"x": 2}, keep={"messages": 1}, parent=c1)
    written = store.write(c2, "task", 0, "x", 3)
    bad = store.value("", "y", 2, "damaged")
    store.bl[bad] = flipped(store.bl[bad])
    _, (_, batch) = drive(
        core.copy_thread("src", "dst"),
        (COPY_READ, copy_reply(store, ttl=100_000)),
        ("batch:restore_records", None),
    )
    (script,) = batch.commands
    assert script.keys == core.keys.thread("dst").with_twins()
    args = restored(script)
    assert args["ttl"] == 120
    assert set(args["cps"]) == set(store.cp) and set(args["wrs"]) == {written}
    assert set(args["bls"]) == set(store.bl) - {bad}, "a damaged value is not copied"
    for kind, records in (("cp", args["cps"]), ("wr", args["wrs"]), ("bl", args["bls"])):
        for field, record in records.items():
            record = record[0] if kind == "cp" else record
            assert opens(core, kind, "dst", field, record), "sealed for the copy"
            assert not opens(core, kind, "src", field, record), "and for it only"
    assert args["cps"][store.member(c1)][1] == b"r1" and args["cps"][store.member(c2)][1] == b""
    assert args["els"] == store.el and len(store.el) == 2, "elements go as they are"
    # the copy's run goes into the run index in the same round trip
    assert batch.ahead == (
        ("SADD", core.keys.run("r1"), "dst"),
        ("EXPIRE", core.keys.run("r1"), 120),
    )


def test_copy_of_a_thread_waiting_on_an_interrupt_does_not_expire_either() -> None:
    core = make_core(ttl=120)
    store = Store(core, "src")
    store.checkpoint(1, {"x": 1})
    _, (_, batch) = drive(
        core.copy_thread("src", "dst"),
        (COPY_READ, copy_reply(store, ttl=-1)),  # PTTL -1: persisted (_prelude.lua arm)
        ("batch:restore_records", None),
    )
    assert batch.commands[0].args[0] == "persist"


def test_copy_of_nothing_that_verifies_writes_nothing() -> None:
    core = make_core()
    store = Store(core, "src")
    only = store.checkpoint(1, {"x": 1})
    store.cp[store.member(only)] = b"garbage"
    _, ops = drive(core.copy_thread("src", "dst"), (COPY_READ, copy_reply(store)))
    assert len(ops) == 1
    # every source hash of the wrong type reads as empty: still nothing to write
    _, ops = drive(
        core.copy_thread("src", "dst"),
        (COPY_READ, [WRONGTYPE] * 6 + [-2, {}, [], []]),
    )
    assert len(ops) == 1


def test_copy_carries_the_ledger_and_a_signed_copy_gets_heads_of_its_own() -> None:
    core = make_core(signing_key=b"k" * 32)
    store = Store(core, "src")
    c1 = store.checkpoint(1, {"x": 1})
    c2 = store.checkpoint(2, {"x": 2}, parent=c1)
    sub = store.checkpoint(1, {"y": 1}, ns="child:1")
    keys = core.keys
    field = keys.ledger_field(keys.ledger_task("", 1, "[node]"), "", 0, "charge", "h" * 32)
    entry = LedgerEntry(
        field=field, **vars(keys.parse_ledger_field(field)), state=RESULT, result="paid"
    )
    record, body = sealed_entry(core, "src", entry)
    mark_field, mark = ledger_mark(core.envelope, "src", field, body)  # heads.py
    source_heads = {mark_field.encode(): mark, b"": b"the source's own head: not copied"}
    _, (_, batch) = drive(
        core.copy_thread("src", "dst"),
        (COPY_READ, copy_reply(store, lg={field.encode(): record}, heads=source_heads)),
        ("batch:restore_records", None),
    )
    args = restored(batch.commands[0])
    heads = args["heads"]
    copied = open_entry(core, "dst", field, args["lgs"][field], heads[mark_field])
    assert copied.state == RESULT and copied.result == "paid" and copied.damage is None
    assert open_entry(core, "dst", field, args["lgs"][field], mark).damage == REPLAYED, (
        "the source's mark does not verify for the copy: re-sealed"
    )
    assert set(heads) == {keys.head_field(""), keys.head_field("child:1"), mark_field}
    assert head_checkpoint(core.envelope, "dst", "", heads[keys.head_field("")]) == c2
    assert head_checkpoint(core.envelope, "dst", "child:1", heads["child:1"]) == sub
    with pytest.raises(RecordDamagedError):  # the copy's heads, not the source's
        head_checkpoint(core.envelope, "src", "", heads[keys.head_field("")])
    assert opens(core, LEDGER_RECORD, "dst", field, args["lgs"][field])


# -- delete_for_runs ------------------------------------------------------------------------
def rolled_back(store: Store, deleted: int) -> list[tuple[str, Any]]:
    """The rollback's replies in one thread after its runs are read: the void records,
    the collection, the ledger's cleanup."""
    fields = [f.encode() for f in store.bl]
    return [
        ("batch:HSET,ZADD", [1, 1]),
        (COLLECT, [b"5", store.hgetall_cp(), fields, []]),
        ("delete_checkpoints", deleted),
    ]


def test_a_run_the_index_names_is_rolled_back_in_its_threads_only() -> None:
    core = make_core()
    store = Store(core)
    c1 = store.checkpoint(1, {"x": 1}, metadata={"run_id": "r0"})
    c2 = store.checkpoint(2, {"x": 2}, parent=c1, metadata={"run_id": "r1"})
    c3 = store.checkpoint(3, {"x": 3}, parent=c2, metadata={"run_id": "r1"})
    # The runs hash is unsigned: the records' metadata wins where they disagree.
    runs = {store.member(c1).encode(): b"r1", store.member(c2).encode(): b"r0"}
    _, ops = drive(
        core.delete_for_runs(["r1"]),
        ("batch:SMEMBERS", [[THREAD.encode()]]),
        ("batch:HGETALL,HGETALL", [runs, store.hgetall_cp()]),
        *rolled_back(store, 2),
        NO_LEDGER,
    )
    assert ops[0].commands == [("SMEMBERS", core.keys.run("r1"))]
    assert not any(isinstance(op, ScanKeys) for op in ops), "the index named the thread"
    void = ops[2].commands
    assert void[0][:3] == ("HSET", store.tk.lg, KeySchema.ledger_void_field("r1"))
    assert void[1] == ("ZADD", store.tk.lgx, 0, KeySchema.ledger_void_field("r1"))
    delete = ops[4].args
    assert delete[2:5] == [2, store.member(c2), store.member(c3)]
    x2, x3 = (f.encode() for f in store.bl if f.endswith(("2.0", "3.0")))
    assert delete[5:8] == [2, x2, x3], "the values only the run's checkpoints held"
    # the ledger entries of steps up to the oldest checkpoint left are dropped (none here)
    assert ops[5].args[2] == "fields"


def test_a_void_record_verifies_as_the_ledger_reads_it() -> None:
    core = make_core(ttl=10)
    store = Store(core)
    store.checkpoint(1, {"x": 1}, metadata={"run_id": "r1"})
    _, ops = drive(
        core.delete_for_runs(["r1"]),
        ("batch:SMEMBERS", [[THREAD.encode()]]),
        ("batch:HGETALL,HGETALL", [{}, store.hgetall_cp()]),
        ("batch:HSET,ZADD,EXPIRE,EXPIRE", [1, 1, 1, 1]),
        (COLLECT, [b"5", store.hgetall_cp(), [f.encode() for f in store.bl], []]),
        ("delete_checkpoints", 1),
    )
    (_, _, field, record), *_ = ops[2].commands
    assert voided_runs(core, THREAD, [field.encode(), record]) == {"r1"}
    assert voided_runs(core, "another", [field.encode(), record]) == set(), "bound to the thread"
    assert ops[2].commands[2] == ("EXPIRE", store.tk.lg, 10)


def test_rolling_back_a_signed_namespaces_newest_writes_its_head_again() -> None:
    core = make_core(signing_key=b"k" * 32)
    store = Store(core)
    c1 = store.checkpoint(1, {"x": 1}, metadata={"run_id": "r0"})
    store.checkpoint(2, {"x": 2}, parent=c1, metadata={"run_id": "r1"})
    store.checkpoint(1, {"y": 1}, ns="child:1", metadata={"run_id": "r1"})
    _, ops = drive(
        core.delete_for_runs(["r1"]),
        ("batch:SMEMBERS", [[THREAD.encode()]]),
        ("batch:HGETALL,HGETALL", [{}, store.hgetall_cp()]),
        *rolled_back(store, 2),
        NO_LEDGER,
    )
    args = ops[4].args
    n = args[2]
    b = args[3 + n]
    h, *updates = args[4 + n + b :]
    assert h == 2
    heads = dict(zip(updates[0::2], updates[1::2]))
    assert heads["child:1"] == "", "a namespace left empty loses its head"
    assert head_checkpoint(core.envelope, THREAD, "", heads[core.keys.head_field("")]) == c1


def test_an_unknown_run_is_nothing_to_do_once_every_thread_is_indexed() -> None:
    core = make_core()
    _, ops = drive(
        core.delete_for_runs(["r9"]),
        ("batch:SMEMBERS", [[]]),
        ("batch:EXISTS", [1]),  # P:run-index: every thread is in the index
    )
    assert ops[1].commands == [("EXISTS", core.keys.run_index_marker())]
    assert not any(isinstance(op, ScanKeys) for op in ops)


def test_an_unknown_run_without_the_marker_searches_every_thread() -> None:
    core = make_core()
    a, b = Store(core, "a"), Store(core, "b")
    a.checkpoint(1, {"x": 1}, metadata={"run_id": "r9"})
    b.checkpoint(1, {"x": 1}, metadata={"run_id": "other"})
    keys = [f"{PREFIX}:{{a}}:cps".encode(), f"{PREFIX}:{{b}}:lg".encode(), b"elsewhere"]
    _, ops = drive(
        core.delete_for_runs(["r9"]),
        ("batch:SMEMBERS", [[]]),
        ("batch:EXISTS", [0]),
        ("ScanKeys", keys),
        ("batch:HGETALL,HGETALL", [{}, a.hgetall_cp()]),
        ("batch:HSET,ZADD", [1, 1]),
        (COLLECT, [b"1", a.hgetall_cp(), [f.encode() for f in a.bl], []]),
        ("delete_checkpoints", 1),
        ("batch:HGETALL,HGETALL", [{}, b.hgetall_cp()]),  # another run's: untouched
    )
    assert ops[2].pattern == core.keys.thread_scan_pattern()
    assert ops[3].commands[0][1] == a.tk.runs and ops[7].commands[0][1] == b.tk.runs


def test_an_index_naming_a_thread_that_does_not_exist_is_not_trusted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = make_core()
    ghost, real = core.keys.thread("ghost"), Store(core, "real")
    real.checkpoint(1, {"x": 1}, metadata={"run_id": "r1"})
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        _, ops = drive(
            core.delete_for_runs(["r1"]),
            ("batch:SMEMBERS", [[b"ghost"]]),
            ("batch:HGETALL,HGETALL", [{}, {}]),
            ("batch:EXISTS", [0]),  # no such thread
            ("ScanKeys", [f"{PREFIX}:{{ghost}}:lg".encode(), f"{PREFIX}:{{real}}:cp".encode()]),
            ("batch:HGETALL,HGETALL", [{}, real.hgetall_cp()]),
            ("batch:HSET,ZADD", [1, 1]),
            (COLLECT, [b"1", real.hgetall_cp(), [f.encode() for f in real.bl], []]),
            ("delete_checkpoints", 1),
        )
    assert ops[2].commands == [("EXISTS", *ghost.all())]
    assert ops[4].commands[0][1] == real.tk.runs, "the ghost is not visited twice"
    assert "names a thread that does not exist" in caplog.text


def test_a_named_thread_the_run_left_nothing_in_gets_a_void_record_only() -> None:
    """The run recorded ledger calls but no checkpoint there (or they were pruned): its
    decisions are voided, and nothing is deleted."""
    core = make_core()
    store = Store(core)
    store.checkpoint(1, {"x": 1}, metadata={"run_id": "r0"})
    _, ops = drive(
        core.delete_for_runs(["r1"]),
        ("batch:SMEMBERS", [[THREAD.encode()]]),
        ("batch:HGETALL,HGETALL", [{}, store.hgetall_cp()]),
        ("batch:HSET,ZADD", [1, 1]),
    )
    assert ops[-1].commands[1] == ("ZADD", store.tk.lgx, 0, KeySchema.ledger_void_field("r1"))


def test_no_runs_is_no_round_trip() -> None:
    _, ops = drive(make_core().delete_for_runs([]))
    assert ops == []


def test_index_runs_puts_every_thread_in_its_runs_sets_once() -> None:
    core = make_core(ttl=50)
    _, ops = drive(
        core.index_runs(),
        ("batch:EXISTS", [0]),
        ("ScanKeys", [f"{PREFIX}:{{a}}:cp".encode(), f"{PREFIX}:{{b}}:cps".encode()]),
        ("batch:HVALS", [[b"r1", b"r2", b"r1"]]),
        ("batch:", None),
        ("batch:HVALS", [[]]),
        ("batch:SET", [True]),
    )
    assert ops[3].ahead == (
        ("SADD", core.keys.run("r1"), "a"),
        ("EXPIRE", core.keys.run("r1"), 50),
        ("SADD", core.keys.run("r2"), "a"),
        ("EXPIRE", core.keys.run("r2"), 50),
    )
    assert ops[-1].commands == [("SET", core.keys.run_index_marker(), "1")]
    done, ops = drive(core.index_runs(), ("batch:EXISTS", [1]))
    assert done == 0 and len(ops) == 1
