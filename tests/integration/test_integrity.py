"""Integrity: damaged records are detected before deserialization, skipped, reported and
survived; a read never returns damaged data."""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from langgraph_durable import (
    CheckpointCorruptedError,
    RecordDamagedError,
    RedisSaver,
    UnreadableThreadError,
)
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.keys import KeySchema
from tests.helpers import graphs
from tests.helpers.redis_keys import flipped

KEY = b"k" * 32
OLD_KEY = b"o" * 32


# -- the envelope alone (no server) -----------------------------------------------------


@given(body=st.binary(max_size=2000), data=st.data())
def test_any_bit_flip_or_truncation_is_detected(body: bytes, data: st.DataObject) -> None:
    for envelope in (Envelope(), Envelope(KEY)):
        identity = KeySchema.identity("cp", "thread", "ns\x00id")
        record = envelope.seal(identity, body)
        assert envelope.open(identity, record) == body
        bit = data.draw(st.integers(0, len(record) * 8 - 1))
        flipped = bytearray(record)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(RecordDamagedError):
            envelope.open(identity, bytes(flipped))
        cut = data.draw(st.integers(0, len(record) - 1))
        with pytest.raises(RecordDamagedError):
            envelope.open(identity, record[:cut])


def test_record_under_another_identity_is_rejected() -> None:
    envelope = Envelope()
    record = envelope.seal(KeySchema.identity("bl", "t1", "ns\x00ch\x001"), b"body")
    for other in (
        ("bl", "t2", "ns\x00ch\x001"),
        ("bl", "t1", "ns\x00ch\x002"),
        ("wr", "t1", "ns\x00ch\x001"),
    ):
        with pytest.raises(RecordDamagedError, match="checksum mismatch"):
            envelope.open(KeySchema.identity(*other), record)


def test_signatures_reject_forgeries_and_rotate_keys() -> None:
    identity = KeySchema.identity("cp", "t", "f")
    forged = Envelope().seal(identity, b"payload")  # a correct plain checksum
    with pytest.raises(RecordDamagedError, match="bad signature"):
        Envelope(KEY).open(identity, forged)
    old_record = Envelope(OLD_KEY).seal(identity, b"old")
    rotated = Envelope([KEY, OLD_KEY])
    assert rotated.open(identity, old_record) == b"old"
    assert rotated.open(identity, rotated.seal(identity, b"new")) == b"new"
    assert Envelope(KEY).open(identity, rotated.seal(identity, b"new")) == b"new"
    with pytest.raises(RecordDamagedError, match="unknown key"):
        Envelope(KEY).open(identity, old_record)
    with pytest.raises(RecordDamagedError, match="no signing_key"):
        Envelope().open(identity, old_record)
    with pytest.raises(ValueError, match="16 bytes"):
        Envelope(b"short")


def test_unknown_format_version_and_garbage() -> None:
    identity = KeySchema.identity("cp", "t", "f")
    record = bytearray(Envelope().seal(identity, b"x"))
    record[2] = 9
    with pytest.raises(RecordDamagedError, match="unknown format version 9"):
        Envelope().open(identity, bytes(record))
    with pytest.raises(RecordDamagedError, match="not a langgraph-durable record"):
        Envelope().open(identity, b"garbage that is long enough")
    with pytest.raises(RecordDamagedError, match="missing"):
        Envelope().open(identity, None)


# -- damaged threads on a real server -----------------------------------------------------


def cfg(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def snapshot(saver: RedisSaver, thread_id: str) -> dict[str, tuple[Any, ...]]:
    """checkpoint id -> everything a read returns for it, from an undamaged thread."""
    return {
        t.checkpoint["id"]: (t.checkpoint, t.metadata, t.pending_writes, t.parent_config)
        for t in saver.list(cfg(thread_id))
    }


def assert_intact(tup: Any, pristine: dict[str, tuple[Any, ...]], thread_id: str) -> None:
    """A read result equals what was stored, except pending writes it may have dropped."""
    checkpoint, metadata, writes, parent = pristine[tup.checkpoint["id"]]
    assert tup.checkpoint == checkpoint
    assert tup.metadata == metadata
    assert all(w in writes for w in tup.pending_writes)
    if parent:
        assert (
            tup.parent_config["configurable"]["checkpoint_id"]
            == parent["configurable"]["checkpoint_id"]
        )
        assert tup.parent_config["configurable"]["thread_id"] == thread_id


def build_template(saver: RedisSaver, thread_id: str) -> None:
    graph = graphs.react_graph(rounds=3).compile(checkpointer=saver)
    graph.invoke(graphs.react_input(), cfg(thread_id))
    # pending writes on the newest checkpoint, as after a crash inside a superstep
    latest = saver.get_tuple(cfg(thread_id))
    saver.put_writes(
        latest.config, [("messages", "w1"), ("extra", 2)], task_id="pending-task", task_path="~x"
    )


def flip_newest_checkpoint(saver: RedisSaver, client: redis.Redis, thread_id: str) -> str:
    tk = saver.keys.thread(thread_id)
    newest = client.zrevrange(tk.cps, 0, 0)[0]
    record = client.hget(tk.cp, newest)
    client.hset(tk.cp, newest, flipped(record, len(record) // 2, 0x10))
    return saver.keys.parse_checkpoint_member(newest)[1]


def test_damaged_newest_checkpoint_falls_back_and_reports(
    saver: RedisSaver, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    build_template(saver, "t")
    pristine = snapshot(saver, "t")
    ordered = sorted(pristine, reverse=True)
    damaged_id = flip_newest_checkpoint(saver, redis_client, "t")
    assert damaged_id == ordered[0]
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        tup = saver.get_tuple(cfg("t"))
    assert tup.checkpoint["id"] == ordered[1]
    assert_intact(tup, pristine, "t")
    report = saver.recovery_report("t")
    assert report is not None and report.fell_back
    assert [(s.checkpoint_id, s.reason) for s in report.skipped] == [
        (damaged_id, "checksum mismatch")
    ]
    assert report.used_checkpoint_id == ordered[1]
    assert report.recovered_from_step == pristine[ordered[1]][1]["step"]
    assert "recovered from checkpoint" in caplog.text and damaged_id in caplog.text
    # Quarantined, not deleted; an explicit read names the reason.
    tk = saver.keys.thread("t")
    assert redis_client.hlen(tk.qt) == 1
    with pytest.raises(CheckpointCorruptedError, match="checksum mismatch") as info:
        saver.get_tuple(cfg("t", damaged_id))
    assert info.value.checkpoint_id == damaged_id and info.value.thread_id == "t"
    assert damaged_id not in {t.checkpoint["id"] for t in saver.list(cfg("t"))}


def test_explicit_damaged_id_raises_before_any_quarantine(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    build_template(saver, "e")
    damaged_id = flip_newest_checkpoint(saver, redis_client, "e")
    with pytest.raises(CheckpointCorruptedError, match="checksum mismatch") as info:
        saver.get_tuple(cfg("e", damaged_id))
    assert info.value.key == saver.keys.thread("e").cp


def test_damaged_pending_write_drops_its_task_not_the_checkpoint(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    build_template(saver, "w")
    newest = saver.get_tuple(cfg("w"))
    saver.put_writes(newest.config, [("messages", "other task")], task_id="healthy-task")
    tk = saver.keys.thread("w")
    task_members = [m for m in redis_client.zrange(tk.wix, 0, -1) if b"pending-task" in m]
    assert len(task_members) == 2
    redis_client.hset(tk.wr, task_members[-1], b"LD\x01\x01" + b"\x00" * 16 + b"junk")
    tup = saver.get_tuple(cfg("w"))
    assert tup.checkpoint["id"] == newest.checkpoint["id"]
    # Both writes of the damaged task go (it runs again as a whole); the other task stays.
    assert tup.pending_writes == [("healthy-task", "messages", "other task")]
    report = saver.recovery_report("w")
    assert report is not None and not report.fell_back and len(report.dropped_writes) == 1
    assert redis_client.hlen(tk.qt) == 2
    assert not [m for m in redis_client.zrange(tk.wix, 0, -1) if b"pending-task" in m]
    # The task's re-run writes fresh values instead of mixing with old ones.
    saver.put_writes(
        tup.config, [("messages", "new"), ("extra", 3)], task_id="pending-task", task_path="~x"
    )
    assert sorted(saver.get_tuple(cfg("w")).pending_writes) == sorted(
        [
            ("healthy-task", "messages", "other task"),
            ("pending-task", "messages", "new"),
            ("pending-task", "extra", 3),
        ]
    )


def test_every_version_damaged_returns_none_and_logs_error(
    saver: RedisSaver, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    build_template(saver, "all")
    tk = saver.keys.thread("all")
    for member, record in redis_client.hgetall(tk.cp).items():
        redis_client.hset(tk.cp, member, record[:-3])
    with caplog.at_level(logging.ERROR, logger="langgraph_durable"):
        assert saver.get_tuple(cfg("all")) is None
    assert "starts again from step 0" in caplog.text
    assert list(saver.list(cfg("all"))) == []


def test_signed_saver_rejects_records_written_without_the_key(
    redis_url: str, key_prefix: str
) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as plain,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY) as signed,
    ):
        build_template(plain, "forged")
        with pytest.raises(UnreadableThreadError, match="written without signing_key"):
            signed.get_tuple(cfg("forged"))
        build_template(signed, "genuine")
        assert signed.get_tuple(cfg("genuine")) is not None
        with pytest.raises(UnreadableThreadError):  # cannot verify: rejected, not trusted
            plain.get_tuple(cfg("genuine"))
        # Signature failures may be a reader's configuration: they are never quarantined.
        assert signed.get_tuple(cfg("genuine")) is not None


DAMAGE = st.sampled_from(
    [
        "flip",
        "truncate",
        "garbage",
        "delete_field",
        "delete_member",
        "swap",
        "foreign",
        "empty",
        "wrong_type",
        "delete_key",
        "bogus_member",
    ]
)


@settings(
    max_examples=int(os.environ.get("LGD_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    damages=st.lists(
        st.tuples(DAMAGE, st.sampled_from(["cp", "wr", "bl", "cps", "wix"]), st.integers(0, 10**6)),
        min_size=1,
        max_size=4,
    )
)
@example(damages=[("wrong_type", "cps", 0), ("bogus_member", "wix", 0)])  # found in CI
def test_random_damage_never_yields_a_damaged_read(
    saver: RedisSaver, redis_client: redis.Redis, damages: list[tuple[str, str, int]]
) -> None:
    if not redis_client.exists(saver.keys.thread("template").cps):
        build_template(saver, "template")
        build_template(saver, "foreign")
    pristine_template = snapshot(saver, "template")
    victim = f"victim-{uuid.uuid4().hex[:8]}"
    saver.copy_thread("template", victim)
    pristine = snapshot(saver, victim)
    assert len(pristine) == len(pristine_template)
    tk, foreign = saver.keys.thread(victim), saver.keys.thread("foreign")
    for kind, where, pick in damages:
        key = getattr(tk, where)
        if kind in ("wrong_type", "delete_key"):
            redis_client.delete(key)
            if kind == "wrong_type":
                redis_client.set(key, b"garbage from a bad restore")
            continue
        if redis_client.type(key) not in (b"hash", b"zset"):
            continue  # an earlier damage replaced the whole key
        if kind == "bogus_member" and where in ("cps", "wix"):
            index_intact = redis_client.type(tk.cps) == b"zset"  # it may be damaged too
            anchors = (index_intact and redis_client.zrange(tk.cps, 0, -1)) or [b"\x00x"]
            anchor = anchors[pick % len(anchors)]
            junk = bytes([pick % 256, (pick >> 8) % 256])
            redis_client.zadd(key, {(anchor if where == "wix" else b"") + b"\x00" + junk: 0})
            continue
        if where in ("cps", "wix"):
            members = redis_client.zrange(key, 0, -1)
            if members:
                redis_client.zrem(key, members[pick % len(members)])
            continue
        fields = sorted(redis_client.hkeys(key))
        if not fields:
            continue
        field = fields[pick % len(fields)]
        record = redis_client.hget(key, field) or b""
        if kind == "flip" and record:
            b = bytearray(record)
            b[pick % len(b)] ^= 1 << (pick % 8)
            redis_client.hset(key, field, bytes(b))
        elif kind == "truncate":
            redis_client.hset(key, field, record[: pick % max(1, len(record))])
        elif kind == "garbage":
            redis_client.hset(key, field, bytes([pick % 256]) * (pick % 300))
        elif kind in ("delete_field", "delete_member"):
            redis_client.hdel(key, field)
        elif kind == "swap" and len(fields) > 1:
            other = fields[(pick + 1) % len(fields)]
            a, b2 = redis_client.hget(key, field), redis_client.hget(key, other)
            redis_client.hset(key, mapping={field: b2, other: a})
        elif kind == "foreign":
            same = redis_client.hget(getattr(foreign, where), field)
            if same is not None:
                redis_client.hset(key, field, same)
        elif kind == "empty":
            redis_client.hset(key, field, b"")
    tup = saver.get_tuple(cfg(victim))
    if tup is not None:
        assert_intact(tup, pristine, victim)
        # it is the newest checkpoint that is still complete
        assert all(
            cid <= tup.checkpoint["id"]
            or cid not in {t.checkpoint["id"] for t in saver.list(cfg(victim))}
            for cid in pristine
        )
    for listed in saver.list(cfg(victim)):
        assert_intact(listed, pristine, victim)
    for listed in saver.list({"configurable": {"thread_id": victim}}):
        assert_intact(listed, pristine, victim)
    for cid in pristine:
        try:
            got = saver.get_tuple(cfg(victim, cid))
        except CheckpointCorruptedError:
            continue
        if got is not None:
            assert_intact(got, pristine, victim)
    saver.delete_thread(victim)


def test_graph_resumes_from_previous_step_when_newest_is_damaged(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    graph = graphs.counter_graph().compile(checkpointer=saver)
    graph.invoke({"value": 1, "trail": []}, cfg("clean"), interrupt_before=["c"])
    expected = graph.invoke(None, cfg("clean"))
    assert expected == {"value": 17, "trail": ["a", "b", "c"]}

    graph.invoke(
        {"value": 1, "trail": []}, cfg("hurt"), interrupt_before=["c"]
    )  # worker stops after "b"
    flip_newest_checkpoint(saver, redis_client, "hurt")
    assert graph.get_state(cfg("hurt")).metadata["step"] == 1  # fell back one step
    assert graph.invoke(None, cfg("hurt")) == expected
    assert saver.recovery_report("hurt").recovered_from_step == 1


def test_keep_last_bounds_each_namespace_and_keeps_a_fallback(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, keep_last=3) as saver:
        graph = graphs.react_graph(rounds=8).compile(checkpointer=saver)
        out = graph.invoke(graphs.react_input(), cfg("kept"))
        kept = list(saver.list(cfg("kept")))
        assert 3 <= len(kept) <= 3 + 4, len(kept)
        assert graph.get_state(cfg("kept")).values == out
        # Only values the kept checkpoints reference remain.
        referenced = {
            saver.keys.blob_field("", ch, v)
            for t in kept
            for ch, v in t.checkpoint["channel_versions"].items()
        }
        stored = {f.decode() for f in redis_client.hkeys(saver.keys.thread("kept").bl)}
        assert stored == referenced
        # A fallback always exists: damage the newest, the previous one is served.
        newest_id = flip_newest_checkpoint(saver, redis_client, "kept")
        fallback = saver.get_tuple(cfg("kept"))
        assert fallback is not None and fallback.checkpoint["id"] < newest_id


def test_keep_last_keeps_delta_channel_history(redis_url: str, key_prefix: str) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, keep_last=2) as saver:
        graph = graphs.delta_graph(steps=25).compile(checkpointer=saver)
        out = graph.invoke({"items": [], "n": 0}, cfg("delta"))
        assert out["items"] == list(range(25))
        assert len(list(saver.list(cfg("delta")))) < 27
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        reloaded = graphs.delta_graph(steps=25).compile(checkpointer=fresh)
        assert reloaded.get_state(cfg("delta")).values == out


def test_verify_reports_damage_and_changes_nothing(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    build_template(saver, "v")
    clean = saver.verify("v")
    assert clean.ok and not clean.damaged_checkpoints
    assert len(clean.intact_checkpoints) == len(list(saver.list(cfg("v"))))
    tk = saver.keys.thread("v")
    latest = saver.get_tuple(cfg("v"))
    blob = saver.keys.blob_field("", "messages", latest.checkpoint["channel_versions"]["messages"])
    redis_client.hset(tk.bl, blob, redis_client.hget(tk.bl, blob)[:-1])
    lonely = redis_client.zrange(tk.cps, 0, 0)[0]
    redis_client.zrem(tk.cps, lonely)
    before = {k: redis_client.dump(k) for k in tk.all()}
    report = saver.verify("v")
    assert {k: redis_client.dump(k) for k in tk.all()} == before
    assert not report.ok
    reasons = {(f.kind, f.reason.split(" ")[0]) for f in report.findings}
    assert ("channel value", "checksum") in reasons
    assert ("index", "record") in reasons
    assert latest.checkpoint["id"] in report.damaged_checkpoints


def test_prune_never_removes_the_newest_valid_checkpoint(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    build_template(saver, "p")
    history = sorted(snapshot(saver, "p"), reverse=True)
    tk = saver.keys.thread("p")
    newest = saver.get_tuple(cfg("p"))
    previous = saver.get_tuple(cfg("p", history[1]))
    # Damage a value only the newest checkpoint uses: its record still decodes.
    ch, version = next(
        (c, v)
        for c, v in newest.checkpoint["channel_versions"].items()
        if previous.checkpoint["channel_versions"].get(c) != v
    )
    field = saver.keys.blob_field("", ch, version)
    redis_client.hset(tk.bl, field, b"\x00" + redis_client.hget(tk.bl, field)[1:])
    saver.prune(["p"])
    survivor = saver.get_tuple(cfg("p"))
    assert survivor is not None and survivor.checkpoint["id"] == history[1]
    assert survivor.checkpoint == previous.checkpoint


@pytest.mark.parametrize("kind", ["cps", "cp", "bl", "wix", "wr"])
def test_every_write_moves_a_wrong_type_key_aside_and_lands(
    saver: RedisSaver, redis_client: redis.Redis, kind: str
) -> None:
    """Write scripts check types only when a write fails; then they ask for the damaged
    twins (LGD_REPAIR), move the key there, and write again."""
    graph = graphs.counter_graph().compile(checkpointer=saver)
    first = graph.invoke({"value": 1, "trail": []}, cfg(f"wt-{kind}"))
    tk = saver.keys.thread(f"wt-{kind}")
    key = getattr(tk, kind)
    redis_client.delete(key)
    redis_client.set(key, b"not a hash or a sorted set")
    if kind in ("wix", "wr"):  # only pending writes lost: the thread goes on as usual
        graph.invoke({"value": 1, "trail": []}, cfg("wt-control"))
        expected = graph.invoke({"value": 1, "trail": []}, cfg("wt-control"))
    else:  # no checkpoint verifies any more: the thread starts again from step 0
        expected = first
    assert graph.invoke({"value": 1, "trail": []}, cfg(f"wt-{kind}")) == expected
    assert redis_client.get(key + ":damaged") == b"not a hash or a sorted set"
    assert redis_client.type(key) in (b"hash", b"zset")
    saver.put_writes(saver.get_tuple(cfg(f"wt-{kind}")).config, [("late", 1)], "t")
    assert ("t", "late", 1) in saver.get_tuple(cfg(f"wt-{kind}")).pending_writes


def test_a_key_of_the_wrong_type_is_moved_aside_and_the_graph_runs_on(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    graph = graphs.counter_graph().compile(checkpointer=saver)
    expected = graph.invoke({"value": 1, "trail": []}, cfg("typed"))
    tk = saver.keys.thread("typed")
    redis_client.delete(tk.cp)
    redis_client.set(tk.cp, b"a bad restore wrote a string here")
    assert saver.get_tuple(cfg("typed")) is None  # nothing verifies: start from step 0
    assert graph.invoke({"value": 1, "trail": []}, cfg("typed")) == expected
    assert redis_client.get(tk.cp + ":damaged") == b"a bad restore wrote a string here"
    assert saver.get_tuple(cfg("typed")).checkpoint["channel_values"]["value"] == 17
    saver.delete_thread("typed")
    assert not any(redis_client.exists(k) for k in tk.with_twins())


@pytest.mark.parametrize(
    "damage",
    ["garbage", "out of range", "wrong type", "deleted", "an older copy"],
)
def test_a_damaged_write_generation_is_repaired_by_the_next_write(
    saver: RedisSaver, redis_client: redis.Redis, damage: str
) -> None:
    """The generation holds nothing but a number every write increments: damaged, the
    next write starts it again (it used to fail every write with Redis's raw "value is
    not an integer or out of range"); a retention plan made before still does nothing."""
    thread = f"gen-{damage}"
    graph = graphs.counter_graph().compile(checkpointer=saver)
    graph.invoke({"value": 1, "trail": []}, cfg(thread))
    gen = saver.keys.thread(thread).gen
    older = redis_client.get(gen)
    graph.invoke({"value": 1, "trail": []}, cfg(thread))
    if damage == "garbage":
        redis_client.set(gen, b"\xffnot a number")
    elif damage == "out of range":
        redis_client.set(gen, str(2**63 - 1))
    elif damage == "wrong type":
        redis_client.delete(gen)
        redis_client.hset(gen, "a", "b")
    elif damage == "deleted":
        redis_client.delete(gen)
    else:
        redis_client.set(gen, older)
    saver.prune([thread], strategy="keep_latest")  # retention reads it too
    before = len(list(saver.list(cfg(thread))))
    graph.invoke({"value": 1, "trail": []}, cfg(thread))
    assert len(list(saver.list(cfg(thread)))) > before  # the writes landed
    assert int(redis_client.get(gen)) > 0  # a number again
    saver.prune([thread], strategy="keep_latest")
    assert len(list(saver.list(cfg(thread)))) == 1
