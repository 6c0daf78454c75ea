"""Linear memory for list-valued channels (elements.py): each message is stored once per
thread, verified by its digest, sent once, read once per process, and exact under
retention, copy, damage and a lost element hash."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.core import codec
from langgraph_durable.core.errors import CheckpointCorruptedError
from tests.helpers import graphs
from tests.helpers.plans import RoundTrips, before_each, elements_sent
from tests.helpers.redis_keys import flipped


def run_react(saver: Any, thread_id: str, rounds: int) -> dict[str, Any]:
    graph = graphs.react_graph(rounds, payload=3000, realistic=True).compile(checkpointer=saver)
    return graph.invoke(graphs.react_input(), {"configurable": {"thread_id": thread_id}})


def latest(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def value_bytes(client: redis.Redis, saver: RedisSaver, thread_id: str) -> int:
    """Bytes of every channel value, element and pending write the thread stores."""
    tk = saver.keys.thread(thread_id)
    return sum(len(v) for key in (tk.bl, tk.el, tk.wr) for v in client.hvals(key))


def text_of(state: dict[str, Any]) -> int:
    return sum(len(m.content) for m in state["messages"])


def test_a_growing_message_list_costs_each_message_once(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    short, long = run_react(saver, "r10", 10), run_react(saver, "r20", 20)
    tk = saver.keys.thread("r20")
    # One element per message, whatever the number of checkpoints that hold it (a tool
    # result may be stored twice: as its task wrote it, before add_messages gave it an id).
    assert len(long["messages"]) <= redis_client.hlen(tk.el) <= len(long["messages"]) + 20
    # Linear, not quadratic: twice the rounds, about twice the bytes (whole lists: ~3.6x).
    growth = value_bytes(redis_client, saver, "r20") / value_bytes(redis_client, saver, "r10")
    assert growth < 2.4, growth
    memory = sum(redis_client.memory_usage(k, samples=0) or 0 for k in tk.all())
    assert memory < 4 * text_of(long), (memory, text_of(long))  # whole lists: ~16x
    assert (
        saver.get_tuple(latest("r10")).checkpoint["channel_values"]["messages"] == short["messages"]
    )


def test_a_put_sends_only_the_messages_its_parent_lacks(saver: RedisSaver) -> None:
    graph = graphs.react_graph(6, payload=3000, realistic=True).compile(checkpointer=saver)
    trips = RoundTrips(graph.checkpointer)
    out = graph.invoke(graphs.react_input(), {"configurable": {"thread_id": "sent"}})
    tk = saver.keys.thread("sent")
    sent = [d for op in trips.ops for d in elements_sent(op, tk.el)]
    # Each message goes at most twice: with the task's writes, with the checkpoint that
    # first holds it; never again with the checkpoints after.
    assert len(sent) <= 2 * len(out["messages"]), len(sent)
    assert max(sent.count(d) for d in set(sent)) <= 2


def test_a_read_moves_manifests_and_a_fresh_process_reads_the_same(
    saver: RedisSaver, redis_url: str, key_prefix: str
) -> None:
    out = run_react(saver, "read", 5)
    trips = RoundTrips(saver)
    tup = saver.get_tuple(latest("read"))
    assert tup.checkpoint["channel_values"]["messages"] == out["messages"]
    assert trips.reset() == 1  # one round trip; the messages come from this process
    tk = saver.keys.thread("read")
    for op in trips.ops:
        assert all(c[:2] != ("HMGET", tk.el) for c in getattr(op, "commands", [])), op
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        cold = RoundTrips(fresh)
        assert fresh.get_tuple(latest("read")).checkpoint == tup.checkpoint
        assert cold.reset() <= 3  # the checkpoint, its values, their elements
        listed = [
            t.checkpoint["channel_values"].get("messages") for t in fresh.list(latest("read"))
        ]
        assert listed[0] == out["messages"] and listed[-1] is None  # the input checkpoint


def put_messages(saver: Any, parent: dict[str, Any], messages: list[str], step: int) -> Any:
    """A checkpoint whose list channel ``messages`` holds ``messages``."""
    stored = saver.get_tuple(parent)
    cp = empty_checkpoint()
    version = saver.get_next_version(
        stored.checkpoint["channel_versions"]["messages"] if stored else None, None
    )
    cp["channel_values"] = {"messages": list(messages)}
    cp["channel_versions"] = {"messages": version}
    return saver.put(parent, cp, {"source": "loop", "step": step}, {"messages": version})


def words(name: str) -> str:
    return f"{name}: " + " ".join(graphs.prose(200, hash(name) % 1000).split())


def element_digests(client: redis.Redis, saver: RedisSaver, thread_id: str) -> set[bytes]:
    return set(client.hkeys(saver.keys.thread(thread_id).el))


def digests_of(saver: RedisSaver, texts: list[str]) -> set[bytes]:
    """The digests the saver gives these messages (as stored: plain, not compressed)."""
    out = set()
    for text in texts:
        type_, data = saver.serde.dumps_typed(text)
        plain = type_.encode() + b"\x00" + data
        out.add(hashlib.blake2b(plain, digest_size=16).digest())
    return out


def test_retention_deletes_an_element_once_no_checkpoint_names_it(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    a, b, c, d = (words(n) for n in "abcd")
    first = put_messages(saver, latest("gc"), [a, b], 1)
    second = put_messages(saver, first, [a, b, c], 2)
    saver.put_writes(second, [("messages", [d])], "task")  # names d too
    put_messages(saver, second, [a, c, d], 3)  # b removed (RemoveMessage)
    assert element_digests(redis_client, saver, "gc") == digests_of(saver, [a, b, c, d])
    saver.prune(["gc"], keep_last=2)  # the first checkpoint goes; b stays (second has it)
    assert element_digests(redis_client, saver, "gc") == digests_of(saver, [a, b, c, d])
    saver.prune(["gc"], keep_last=1)  # b is named by nothing left; d by the newest
    assert element_digests(redis_client, saver, "gc") == digests_of(saver, [a, c, d])
    assert saver.get_tuple(latest("gc")).checkpoint["channel_values"]["messages"] == [a, c, d]


def test_a_copied_thread_outlives_its_source(saver: RedisSaver, redis_client: redis.Redis) -> None:
    out = run_react(saver, "source", 3)
    saver.copy_thread("source", "copy")
    saver.delete_thread("source")
    assert (
        saver.get_tuple(latest("copy")).checkpoint["channel_values"]["messages"] == out["messages"]
    )
    assert saver.verify("copy").ok


def test_a_damaged_element_is_never_read(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    a, b, c = (words(n) for n in "abc")
    first = put_messages(saver, latest("hurt"), [a, b], 1)
    put_messages(saver, first, [a, b, c], 2)
    tk = saver.keys.thread("hurt")
    (damaged,) = digests_of(saver, [c])
    redis_client.hset(tk.el, damaged, flipped(redis_client.hget(tk.el, damaged)))
    # A process that has not seen c reads Redis: the checkpoint naming c is skipped.
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(latest("hurt"))
        assert tup.checkpoint["channel_values"]["messages"] == [a, b]
        report = fresh.recovery_report("hurt")
        assert report is not None and report.fell_back
        assert f"checksum mismatch element {damaged.hex()}" in report.skipped[0].reason
        # The read moved the element aside (its bytes kept), not the checkpoint naming it.
        assert not redis_client.hexists(tk.el, damaged)
        assert redis_client.hexists(tk.qt, fresh.keys.quarantine_field("el", damaged.hex()))
        assert redis_client.zcard(tk.cps) == 2
        found = fresh.verify("hurt")
        assert any(f"missing element {damaged.hex()}" in f.reason for f in found.findings)


def test_swapped_elements_are_damage_never_another_message(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Someone who can write to Redis swaps two stored messages: no read returns one in
    the other's place, signed or not."""
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=b"k" * 32
    ) as saver:
        a, b = words("a"), words("b")
        put_messages(saver, latest("swap"), [a, b], 1)
        tk = saver.keys.thread("swap")
        da, db = sorted(redis_client.hkeys(tk.el))  # keyed digests: not computable here
        assert not {da, db} & digests_of(saver, [a, b]), "a signing saver keys its digests"
        ea, eb = redis_client.hget(tk.el, da), redis_client.hget(tk.el, db)
        redis_client.hset(tk.el, mapping={da: eb, db: ea})
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=b"k" * 32
    ) as fresh:
        assert fresh.get_tuple(latest("swap")) is None  # its one checkpoint is damaged
        assert "checksum mismatch element" in fresh.recovery_report("swap").skipped[0].reason


def test_a_lost_element_hash_is_written_again_by_the_next_put(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """The element hash alone evicted (or expired, or deleted): a put that passes on the
    parent's messages finds them gone and sends them all, so what it acknowledges reads
    back in a fresh process (it used to be refused, or stored unreadable)."""
    a, b, c = (words(n) for n in "abc")
    first = put_messages(saver, latest("lost"), [a, b], 1)
    redis_client.delete(saver.keys.thread("lost").el)
    put_messages(saver, first, [a, b, c], 2)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert fresh.get_tuple(latest("lost")).checkpoint["channel_values"] == {
            "messages": [a, b, c]
        }
        assert fresh.recovery_report("lost") is None
        assert fresh.get_tuple({"configurable": {**first["configurable"]}}) is not None


def test_small_lists_and_other_values_are_stored_whole(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    put_messages(saver, latest("small"), [1, 2, 3], 1)
    assert redis_client.hlen(saver.keys.thread("small").el) == 0
    assert saver.get_tuple(latest("small")).checkpoint["channel_values"]["messages"] == [1, 2, 3]


def test_the_async_saver_stores_and_reads_elements(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            graph = graphs.react_graph(3, payload=3000, realistic=True).compile(checkpointer=saver)
            out = await graph.ainvoke(graphs.react_input(), latest("async"))
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
            return out, await fresh.aget_tuple(latest("async"))

    out, tup = asyncio.run(scenario())
    assert tup.checkpoint["channel_values"]["messages"] == out["messages"]
    assert redis_client.hlen(f"{key_prefix}:{{async}}:el") >= len(out["messages"])


def test_whole_lists_on_request_and_either_form_reads_back(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """``list_elements=False`` (before a rollback to a release without elements) stores
    whole lists; a thread written in both forms reads back whole with either setting."""
    a, b, c = (words(n) for n in "abc")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as split:
        first = put_messages(split, latest("mixed"), [a, b], 1)
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, list_elements=False
    ) as whole:
        put_messages(whole, first, [a, b, c], 2)
        tk = whole.keys.thread("mixed")
        assert redis_client.hlen(tk.el) == 2  # the first checkpoint's only
        assert whole.get_tuple(latest("mixed")).checkpoint["channel_values"]["messages"] == [
            a,
            b,
            c,
        ]
        assert whole.get_tuple(first).checkpoint["channel_values"]["messages"] == [a, b]
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert [
            t.checkpoint["channel_values"]["messages"] for t in fresh.list(latest("mixed"))
        ] == [
            [a, b, c],
            [a, b],
        ]


def checkpoint_of(n: int, versions: dict[str, str], values: dict[str, Any]) -> Any:
    cp = empty_checkpoint()
    cp["id"] = f"1ef00000-0000-6000-8000-00000000000{n}"
    cp["channel_versions"], cp["channel_values"] = versions, values
    return cp


def test_a_delta_history_whose_seed_lost_an_element_raises(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """A seed is the start of a DeltaChannel's value: one missing element must not make
    the walk skip it (a history without its seed rebuilds a wrong value)."""
    a, b, c = (words(n) for n in "abc")
    first = saver.put(latest("delta"), checkpoint_of(1, {"o": "1.x"}, {"o": 1}), {}, {"o": "1.x"})
    saver.put_writes(first, [("msgs", [words("x")])], "task1")
    second_cp = checkpoint_of(2, {"o": "1.x", "msgs": "2.x"}, {"o": 1, "msgs": [a, b]})
    second = saver.put(first, second_cp, {}, {"msgs": "2.x"})
    saver.put_writes(second, [("msgs", [c])], "task2")
    third_cp = checkpoint_of(3, {"o": "1.x", "msgs": "3.x"}, {"o": 1})
    third = saver.put(second, third_cp, {}, {"msgs": "3.x"})
    history = saver.get_delta_channel_history(config=third, channels=["msgs"])
    assert history["msgs"]["seed"] == [a, b]
    (gone,) = digests_of(saver, [a])
    redis_client.hdel(saver.keys.thread("delta").el, gone)
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh,
        pytest.raises(CheckpointCorruptedError, match=f"missing element {gone.hex()}"),
    ):
        fresh.get_delta_channel_history(config=third, channels=["msgs"])


def test_a_write_while_a_prune_is_planned_voids_its_deletion(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Another worker's pending write names an element only a doomed checkpoint named
    (stored already, so its HSETNX changes nothing) between a prune's plan and its
    deletion: the thread's write generation moved, the prune plans again and keeps it."""
    doc, other, new = words("doc"), words("other"), words("new")
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as pruner,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker,
    ):
        first = put_messages(pruner, latest("race"), [doc, other], 1)
        second = put_messages(pruner, first, [new, other], 2)  # doc named by first only
        tk = pruner.keys.thread("race")
        plans = []

        def racing(op: Any) -> None:
            if getattr(op, "name", "") == "delete_checkpoints":
                plans.append(op)
                if len(plans) == 1:  # the other worker writes in between, once
                    worker.put_writes(second, [("messages", [doc])], "task")

        pruner.drive(before_each(pruner.core.prune(["race"], keep_last=1), racing))
        assert len(plans) == 2  # the first deletion was void, the second went through
        assert redis_client.zcard(tk.cps) == 1
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert fresh.get_tuple(second).pending_writes == [("task", "messages", [doc])]


def test_verify_and_the_fallback_pin_look_in_redis_not_in_memory(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    """The process that wrote an element holds it; Redis no longer does. verify and
    prune's "newest checkpoint that verifies" must judge what any reader would read."""
    a, b, c = (words(n) for n in "abc")
    first = put_messages(saver, latest("held"), [a, b], 1)
    put_messages(saver, first, [a, b, c], 2)
    (gone,) = digests_of(saver, [c])
    redis_client.hdel(saver.keys.thread("held").el, gone)
    assert any(f"missing element {gone.hex()}" in f.reason for f in saver.verify("held").findings)
    saver.prune(["held"], keep_last=1)  # the newest does not verify: the first one stays
    assert saver.keys.checkpoint_member("", first["configurable"]["checkpoint_id"]).encode() in (
        redis_client.zrange(saver.keys.thread("held").cps, 0, -1)
    )


def test_a_manifest_naming_one_element_many_times_is_damage_not_memory(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Without a signing key, whoever can write to Redis can forge a small manifest that
    names one large element many times: the list is refused past what one record may
    hold, before it is built."""
    put_messages(saver, latest("amp"), [words("a"), words("b")], 1)
    tk = saver.keys.thread("amp")
    field_ = redis_client.hkeys(tk.bl)[0]
    (digest,) = digests_of(saver, ["x" * 100_000])
    type_, data = saver.serde.dumps_typed("x" * 100_000)
    redis_client.hset(tk.el, digest, type_.encode() + b"\x00" + data)
    forged = codec.seal(saver.core, "bl", "amp", field_.decode(), ["lgdl1", digest * 1000])
    redis_client.hset(tk.bl, field_, forged)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        fresh.core.max_record_bytes = 10_000_000  # 100 MB named by a 16 KB manifest
        assert fresh.get_tuple(latest("amp")) is None
        assert "a list of more than" in fresh.recovery_report("amp").skipped[0].reason


def test_the_write_generation_moves_with_every_write_and_never_restarts(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    """What retention's guard reads: every checkpoint and pending write moves it, and a
    lost generation key starts again from the server's clock, never from a number a
    planned deletion may have read before."""
    tk = saver.keys.thread("gen")
    first = put_messages(saver, latest("gen"), [words("a"), words("b")], 1)
    started = int(redis_client.get(tk.gen))
    assert started > 10**15  # microseconds of the server's clock, not 1
    saver.put_writes(first, [("x", 1)], "task")
    assert int(redis_client.get(tk.gen)) == started + 1
    redis_client.delete(tk.gen)  # evicted on its own
    put_messages(saver, first, [words("a"), words("b"), words("c")], 2)
    assert int(redis_client.get(tk.gen)) > started + 1


def test_an_encrypted_thread_stores_each_message_once(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """With an EncryptedSerializer (docs/operations/capacity-and-memory.md) every message is
    encrypted once: a fresh ciphertext at every checkpoint stored every message again each time
    (1,889 elements for 60 messages). A process that resumes the thread knows the
    messages it read by their plaintext, and does not store them again either."""
    pytest.importorskip("Crypto")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    def serde() -> EncryptedSerializer:
        return EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=serde()) as s:
        out = run_react(s, "enc", rounds=10)
        count = len(out["messages"])
        tk = s.keys.thread("enc")
        # at most twice: a task's write and the checkpoint after it may encrypt a new
        # message at the same time (LangGraph writes from other threads)
        assert redis_client.hlen(tk.el) < 2 * count, (redis_client.hlen(tk.el), count)
        raw = b"".join(redis_client.hvals(tk.el))
        assert out["messages"][1].content[:40].encode() not in raw  # encrypted at rest
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as plain:
        run_react(plain, "plain", rounds=10)
        plain_bytes = value_bytes(redis_client, plain, "plain")
    before = redis_client.hlen(tk.el)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=serde()) as fresh:
        graph = graphs.react_graph(10, payload=3000, realistic=True).compile(checkpointer=fresh)
        resumed = graph.invoke(graphs.react_input("again"), {"configurable": {"thread_id": "enc"}})
        new = [m for m in resumed["messages"] if m not in out["messages"]]
        # the old messages it read are not stored again: only what changed
        assert redis_client.hlen(tk.el) - before <= 2 * len(new) < count
        # about what the same thread costs unencrypted (nonce and tag per message)
        assert value_bytes(redis_client, fresh, "enc") < 2.5 * plain_bytes
        assert (
            fresh.get_tuple(latest("enc")).checkpoint["channel_values"]["messages"]
            == (resumed["messages"])
        )
