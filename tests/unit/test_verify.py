"""``verify`` (core/verify.py), driven by hand: one round trip that reads every record of
a thread and changes nothing, and what counts as a finding."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from langgraph_durable.core import codec
from langgraph_durable.core.heads import sealed_head
from langgraph_durable.core.ops import Batch
from langgraph_durable.core.records import Damage
from langgraph_durable.core.repair import repair
from langgraph_durable.core.reports import VerifyReport
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import THREAD, drive, make_core, name_of
from tests.unit.scripted_more import Store

VERIFY = "batch:ZRANGE,HGETALL,ZRANGE,HGETALL,HGETALL,HLEN,HGETALL,HGETALL"


def reply(
    store: Store,
    *,
    cp_index: list[str] | None = None,
    wix: list[str] | None = None,
    quarantined: int = 0,
    heads: dict[str, bytes] | None = None,
) -> list[Any]:
    """The verify batch's replies: both indexes as stored unless given, every hash."""
    return [
        [m.encode() for m in (store.cp if cp_index is None else cp_index)],
        store.hgetall_cp(),
        [m.encode() for m in (store.wr if wix is None else wix)],
        store.hgetall_wr(),
        store.hgetall_bl(),
        quarantined,
        dict(store.el),
        {f.encode(): h for f, h in (heads or {}).items()},
    ]


def verify(core: Any, *replies: Any) -> VerifyReport:
    report, ops = drive(core.verify(THREAD), (VERIFY, list(replies)))
    (batch,) = ops
    assert isinstance(batch, Batch) and batch.errors_as_values and not batch.atomic
    assert all(
        isinstance(c, tuple) and c[0] in ("ZRANGE", "HGETALL", "HLEN") for c in batch.commands
    )
    return report  # type: ignore[no-any-return]


def healthy(core: Any) -> tuple[Store, list[str]]:
    store = Store(core)
    c1 = store.checkpoint(1, {"x": 1, "messages": ["a" * 100, "b" * 100]})
    c2 = store.checkpoint(2, {"x": 2}, keep={"messages": 1}, parent=c1)
    store.write(c2, "task", 0, "x", 3)
    store.write(c2, "task", 1, "messages", ["c" * 100, "d" * 100])
    return store, [c1, c2]


def kinds(report: VerifyReport) -> list[tuple[str, Damage]]:
    return sorted((f.kind, Damage.of(f.reason)) for f in report.findings)


def test_a_healthy_thread_is_ok_in_one_round_trip_that_writes_nothing() -> None:
    core = make_core()
    store, ids = healthy(core)
    report = verify(core, *reply(store))
    assert report.ok and report.findings == []
    assert report.intact_checkpoints == ids and report.damaged_checkpoints == []
    # every record: checkpoints, writes, values and elements
    assert report.records_checked == len(store.cp) + len(store.wr) + len(store.bl) + len(store.el)
    assert len(store.el) == 4


def test_a_damaged_checkpoint_record_is_a_finding_and_the_others_stay_intact() -> None:
    core = make_core()
    store, (c1, c2) = healthy(core)
    store.cp[store.member(c2)] = flipped(store.cp[store.member(c2)])
    report = verify(core, *reply(store))
    assert not report.ok
    (finding,) = report.findings
    assert (finding.kind, finding.field, finding.checkpoint_id) == (
        "checkpoint",
        store.member(c2),
        c2,
    )
    assert Damage.of(finding.reason) is Damage.CHECKSUM_MISMATCH
    assert report.damaged_checkpoints == [c2] and report.intact_checkpoints == [c1]


def test_a_missing_value_damages_the_checkpoints_that_name_it() -> None:
    core = make_core()
    store, (c1, c2) = healthy(core)
    shared = next(f for f in store.bl if "messages" in f)  # both checkpoints name it
    del store.bl[shared]
    report = verify(core, *reply(store))
    assert report.damaged_checkpoints == [c1, c2] and report.intact_checkpoints == []
    assert {(f.kind, f.checkpoint_id) for f in report.findings} == {
        ("channel value", c1),
        ("channel value", c2),
    }
    assert all(f.reason == f"missing channel value {shared!r}" for f in report.findings)


def test_a_damaged_value_is_a_finding_of_its_own_and_of_each_checkpoint() -> None:
    core = make_core()
    store, (c1, c2) = healthy(core)
    x2 = next(f for f in store.fields_of(c2) if "\x00x\x00" in f)
    store.bl[x2] = flipped(store.bl[x2])
    report = verify(core, *reply(store))
    value, checkpoint = sorted(report.findings, key=lambda f: f.field != x2)
    assert (value.kind, value.field, value.checkpoint_id) == ("channel value", x2, None)
    assert (checkpoint.field, checkpoint.checkpoint_id) == (store.member(c2), c2)
    assert checkpoint.reason.startswith("checksum mismatch channel value")
    assert report.intact_checkpoints == [c1]


def test_a_damaged_element_is_a_finding_and_so_are_the_values_naming_it() -> None:
    core = make_core()
    store, (c1, c2) = healthy(core)
    manifest = next(f for f in store.bl if "messages" in f)
    named = codec.manifest_of(core, THREAD, manifest, store.bl[manifest])
    store.el[named[0]] = flipped(store.el[named[0]])
    report = verify(core, *reply(store))
    assert ("element", Damage.CHECKSUM_MISMATCH) in kinds(report)
    element = next(f for f in report.findings if f.kind == "element")
    assert element.field == named[0].hex()
    assert report.damaged_checkpoints == [c1, c2], "both name the list"


def test_index_and_records_that_disagree_are_findings() -> None:
    core = make_core()
    store, (c1, c2) = healthy(core)
    lost = store.member("1ef00009-0000-6000-8000-000000000000")  # indexed, no record
    writes = sorted(store.wr)
    report = verify(
        core,
        *reply(store, cp_index=[store.member(c1), lost, "no separator"], wix=writes[:1]),
    )
    by_field = {f.field: f for f in report.findings}
    assert by_field[lost].reason == Damage.MISSING_RECORD
    assert by_field[store.member(c2)].reason == Damage.NOT_INDEXED
    assert by_field["no separator"].reason == Damage.MALFORMED_MEMBER
    unindexed_write = by_field[writes[1]]
    assert (unindexed_write.kind, unindexed_write.key) == ("index", store.tk.wix)
    assert unindexed_write.reason == Damage.NOT_INDEXED
    # a record outside its index still verifies: the checkpoint is intact, repair reindexes
    assert report.intact_checkpoints == [c1, c2]
    assert report.damaged_checkpoints == ["1ef00009-0000-6000-8000-000000000000"]


def test_a_damaged_write_is_a_finding_of_its_checkpoint() -> None:
    core = make_core()
    store, (_, c2) = healthy(core)
    member = min(store.wr)
    store.wr[member] = flipped(store.wr[member])
    report = verify(core, *reply(store))
    (finding,) = report.findings
    assert (finding.kind, finding.field, finding.checkpoint_id) == ("write", member, c2)
    assert report.intact_checkpoints[-1] == c2, "its checkpoint record is intact"


def test_quarantined_records_make_a_thread_without_findings_not_ok() -> None:
    core = make_core()
    store, _ = healthy(core)
    report = verify(core, *reply(store, quarantined=2))
    assert report.findings == [] and report.quarantined == 2 and not report.ok


def test_a_key_of_the_wrong_type_is_a_finding_and_reads_as_empty() -> None:
    core = make_core()
    store, ids = healthy(core)
    replies = reply(store)
    replies[4] = ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
    report = verify(core, *replies)
    wrong = [f for f in report.findings if f.reason == "key of the wrong type"]
    assert [(f.kind, f.key) for f in wrong] == [("index", store.tk.bl)]
    assert report.damaged_checkpoints == ids, "their values are missing"
    with pytest.raises(ResponseError, match="OOM"):
        replies[4] = ResponseError("OOM command not allowed")
        verify(core, *replies)


# -- signed heads ---------------------------------------------------------------------------
KEY = b"k" * 32


def signed() -> tuple[Any, Store, list[str]]:
    core = make_core(signing_key=KEY)
    store, ids = healthy(core)
    return core, store, ids


def test_a_signed_thread_with_its_head_is_ok() -> None:
    core, store, (_, c2) = signed()
    _, head = sealed_head(core.envelope, THREAD, "", c2)
    assert verify(core, *reply(store, heads={"": head})).ok


def test_a_missing_head_of_a_signed_namespace_is_a_finding() -> None:
    core, store, _ = signed()
    (finding,) = verify(core, *reply(store)).findings
    assert (finding.kind, finding.key, finding.field) == ("head", store.tk.head, "")
    assert finding.reason.startswith("missing: the signed head")


def test_a_forged_head_is_a_finding() -> None:
    core, store, (_, c2) = signed()
    forger = make_core(signing_key=b"f" * 32)
    _, forged = sealed_head(forger.envelope, THREAD, "", c2)
    _, elsewhere = sealed_head(core.envelope, "another thread", "", c2)
    for head in (forged, elsewhere, flipped(sealed_head(core.envelope, THREAD, "", c2)[1])):
        (finding,) = verify(core, *reply(store, heads={"": head})).findings
        assert finding.kind == "head" and Damage.of(finding.reason) in (
            Damage.BAD_SIGNATURE,
            Damage.CHECKSUM_MISMATCH,
        )


def test_a_head_naming_a_removed_newer_checkpoint_is_a_finding() -> None:
    core, store, (c1, _c2) = signed()
    removed = "1ef00003-0000-6000-8000-000000000000"
    _, head = sealed_head(core.envelope, THREAD, "", removed)
    (finding,) = verify(core, *reply(store, heads={"": head})).findings
    assert finding.kind == "head" and finding.checkpoint_id == removed
    assert Damage.of(finding.reason) is Damage.MISSING and removed in finding.reason
    # one naming an older checkpoint is a lower bound kept: no finding
    _, older = sealed_head(core.envelope, THREAD, "", c1)
    assert verify(core, *reply(store, heads={"": older})).ok


def test_no_head_finding_where_no_checkpoint_verifies_for_this_reader() -> None:
    """The reader's key may be what is wrong: its checkpoints' findings say so already."""
    _, store, ids = signed()
    reader = make_core(signing_key=b"r" * 32)
    report = verify(reader, *reply(store))
    assert report.damaged_checkpoints == ids
    assert not any(f.kind == "head" for f in report.findings)
    records = [f for f in report.findings if f.kind in ("checkpoint", "write")]
    assert records and all(Damage.of(f.reason).may_be_configuration for f in records)


def test_a_reader_without_the_key_leaves_a_signed_threads_elements_alone() -> None:
    """Keyed element digests do not match for a reader without the writer's key: its
    configuration, which repair leaves alone (it used to move every element)."""
    _, store, _ = signed()
    assert store.el, "the thread holds elements"
    for reader in (make_core(signing_key=b"r" * 32), make_core()):
        writes = [m.encode() for m in store.wr]
        answers = {
            VERIFY: reply(store),
            "batch:ZRANGE,HKEYS": [writes, writes],
            "quarantine": len(store.el),
        }
        plan, answer = repair(reader, THREAD), None
        while True:  # whatever it asks, once fixed: no quarantine is expected
            try:
                op = plan.send(answer)
            except StopIteration as stop:
                report = stop.value
                break
            answer = answers[name_of(op)]
        assert report.moved == [], "nothing this reader cannot tell from its configuration"
