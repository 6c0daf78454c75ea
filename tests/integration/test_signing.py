"""Signatures bind everything that names a record, the key prefix included, and a key
rotation can be completed: re-sign in place, drop the old key, everything reads."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
import redis
import xxhash

from langgraph_durable import RedisSaver, UnreadableThreadError
from langgraph_durable.core.envelope import MAGIC
from tests.helpers.graphs import react_graph, react_input
from tests.helpers.redis_keys import delete_prefix

OLD_KEY = b"o" * 32
NEW_KEY = b"n" * 32


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def thread_records(client: redis.Redis, saver: RedisSaver, thread_id: str) -> dict[str, Any]:
    tk = saver.keys.thread(thread_id)
    return {kind: client.hgetall(getattr(tk, kind)) for kind in ("cp", "wr", "bl", "lg")}


def messages(saver: RedisSaver, thread_id: str) -> list[str]:
    tup = saver.get_tuple(cfg(thread_id))
    assert tup is not None
    return [m.content for m in tup.checkpoint["channel_values"]["messages"]]


def test_a_record_copied_into_another_prefix_is_rejected(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    other_prefix = key_prefix + "-other"
    try:
        with (
            RedisSaver.from_conn_string(
                redis_url, key_prefix=other_prefix, signing_key=NEW_KEY
            ) as b,
            RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=NEW_KEY) as a,
        ):
            react_graph(1).compile(checkpointer=b).invoke(react_input("from b"), cfg("t"))
            react_graph(1).compile(checkpointer=a).invoke(react_input("from a"), cfg("t"))
            # Someone with write access copies a's newest checkpoint (record, index member,
            # values) into b's same-named thread, where it is the newest (a ran later).
            # Same signing key, thread id and field: only the key prefix tells them apart.
            src, dst = a.keys.thread("t"), b.keys.thread("t")
            member = redis_client.zrevrange(src.cps, 0, 0)[0]
            redis_client.hset(dst.cp, member, redis_client.hget(src.cp, member))
            redis_client.zadd(dst.cps, {member: 0})
            for field, value in redis_client.hgetall(src.bl).items():
                redis_client.hsetnx(dst.bl, field, value)
            assert messages(b, "t")[0] == "from b"  # the copy is skipped, b's own is read
            report = b.recovery_report("t")
            assert report is not None and "bad signature" in report.skipped[0].reason
            assert not b.verify("t").ok
    finally:
        delete_prefix(redis_client, other_prefix)


def test_rotate_resign_drop_the_old_key_and_everything_reads(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=OLD_KEY) as old:
        for thread in ("a", "b"):
            react_graph(3).compile(checkpointer=old).invoke(react_input(thread), cfg(thread))
        expected = {t: messages(old, t) for t in ("a", "b")}
        history = {t: [c.config for c in old.list(cfg(t))] for t in ("a", "b")}
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[NEW_KEY, OLD_KEY]
    ) as rotating:
        reports = rotating.resign()
        assert sorted(r.thread_id for r in reports) == ["a", "b"]
        assert all(r.ok and r.resigned > 0 and r.current == 0 for r in reports)
        again = rotating.resign("a")  # idempotent: nothing left to do
        assert again[0].resigned == 0 and again[0].current == reports[0].resigned
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=NEW_KEY) as new:
        for thread in ("a", "b"):
            assert messages(new, thread) == expected[thread]
            assert [c.config for c in new.list(cfg(thread))] == history[thread]
            assert new.verify(thread).ok
        # and the graph runs on under the new key alone
        react_graph(4).compile(checkpointer=new).invoke(react_input("more"), cfg("a"))
        assert len(messages(new, "a")) > len(expected["a"])


def test_turning_signing_on_over_unsigned_data_raises_then_resign_from_unsigned(
    redis_url: str, key_prefix: str
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as plain:
        react_graph(2).compile(checkpointer=plain).invoke(react_input("x"), cfg("t"))
        expected = messages(plain, "t")
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=NEW_KEY
    ) as signed:
        # Not silently empty: the read says what is wrong and how to fix it.
        with pytest.raises(UnreadableThreadError, match="resign"):
            signed.get_tuple(cfg("t"))
        (report,) = signed.resign("t")  # without from_unsigned nothing is trusted
        assert report.resigned == 0 and report.skipped
        (report,) = signed.resign("t", from_unsigned=True)
        assert report.ok and report.resigned > 0
        assert messages(signed, "t") == expected
        assert signed.verify("t").ok


def seal_v1(identity: bytes, body: bytes) -> bytes:
    """A record as langgraph-durable 0.1 sealed it: format 1, the key prefix not bound."""
    digest = xxhash.xxh3_128(len(identity).to_bytes(4, "big") + identity)
    digest.update(body)
    return MAGIC + bytes((1, 1)) + digest.digest() + body


def test_records_of_the_previous_format_read_and_resign_to_the_current_one(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        react_graph(1).compile(checkpointer=saver).invoke(react_input("old"), cfg("t"))
        expected = messages(saver, "t")
        # Rewrite every record as 0.1 wrote it.
        envelope = saver.core.envelope
        for kind, records in thread_records(redis_client, saver, "t").items():
            for field, record in records.items():
                identity = saver.keys.identity(kind, "t", field)
                body = bytes(envelope.open(identity, record))
                redis_client.hset(
                    getattr(saver.keys.thread("t"), kind), field, seal_v1(identity, body)
                )
        assert messages(saver, "t") == expected
        (report,) = saver.resign("t")
        assert report.ok and report.current == 0 and report.resigned > 0
        records = thread_records(redis_client, saver, "t")
        assert all(r[2] == 2 for rs in records.values() for r in rs.values())
        assert messages(saver, "t") == expected


def test_once_resigned_format_1_records_can_be_refused(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Format 1 does not bind the key prefix: someone with write access could copy old
    records in from another prefix. After resign, accept_format_1=False closes that."""
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=NEW_KEY
    ) as saver:
        react_graph(1).compile(checkpointer=saver).invoke(react_input("old"), cfg("t"))
        tk = saver.keys.thread("t")
        member = redis_client.zrevrange(tk.cps, 0, 0)[0]
        identity = saver.keys.identity("cp", "t", member)
        body = bytes(saver.core.envelope.open(identity, redis_client.hget(tk.cp, member)))
        key_id = hashlib.sha256(NEW_KEY).digest()[:4]
        framed = len(identity).to_bytes(4, "big") + identity
        mac = hmac.new(NEW_KEY, framed + body, hashlib.sha256).digest()
        old_record = MAGIC + bytes((1, 2)) + key_id + mac + body  # as 0.1 signed it
        redis_client.hset(tk.cp, member, old_record)
        assert saver.get_tuple(cfg("t")) is not None  # format 1 is read by default
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=NEW_KEY, accept_format_1=False
    ) as strict:
        tup = strict.get_tuple(cfg("t"))  # skips the format-1 record for the one before
        report = strict.recovery_report("t")
        assert tup is not None and report is not None
        assert "format version 1" in report.skipped[0].reason
        assert redis_client.hget(tk.cp, member) == old_record  # refused, never quarantined


def _element_key(signing_key: bytes) -> bytes:
    return hmac.new(signing_key, b"langgraph-durable element digest", hashlib.sha256).digest()


def _digest_keys(client: redis.Redis, saver: RedisSaver, thread_id: str) -> set[bytes]:
    """Which key (b"" for none) each stored element's digest was taken with."""
    keys = set()
    for digest, stored in client.hgetall(saver.keys.thread(thread_id).el).items():
        for key in (_element_key(OLD_KEY), _element_key(NEW_KEY), b""):
            if hashlib.blake2b(stored, digest_size=16, key=key).digest() == digest:
                keys.add(key)
                break
        else:
            keys.add(b"?")
    return keys


def test_element_digests_are_keyed_and_rekeyed_by_a_rotation(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """With signing_key an element is bound to its signed manifest by a keyed digest:
    one a chat user cannot compute, so cannot craft two messages sharing. A rotation's
    resign re-keys them, so the old key can go; so does signing unsigned data."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as plain:
        react_graph(3).compile(checkpointer=plain).invoke(react_input("u"), cfg("u"))
        assert _digest_keys(redis_client, plain, "u") == {b""}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=OLD_KEY) as old:
        react_graph(3).compile(checkpointer=old).invoke(react_input("s"), cfg("s"))
        assert _digest_keys(redis_client, old, "s") == {_element_key(OLD_KEY)}
        old.resign("u", from_unsigned=True)
        assert _digest_keys(redis_client, old, "u") == {_element_key(OLD_KEY)}
        expected = {t: messages(old, t) for t in ("u", "s")}
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[NEW_KEY, OLD_KEY]
    ) as rotating:
        assert all(r.ok for r in rotating.resign())
        for thread in ("u", "s"):  # re-keyed, the old digests collected
            assert _digest_keys(redis_client, rotating, thread) == {_element_key(NEW_KEY)}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=NEW_KEY) as new:
        for thread in ("u", "s"):
            assert messages(new, thread) == expected[thread]
            report = new.verify(thread)
            assert report.ok, report.findings


def test_a_rotation_of_an_encrypted_thread_loses_nothing(redis_url: str, key_prefix: str) -> None:
    """The rotation of docs/operations/security.md on an EncryptedSerializer thread: a worker
    with [new, old] runs a turn, resign, drop old. The worker must not name elements by the old key's
    digests (it knew them by their plaintext from reading them), and resign re-keys a
    current manifest that still does."""
    pytest.importorskip("Crypto")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    def serde() -> EncryptedSerializer:
        return EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")

    def saver(keys: Any) -> Any:
        return RedisSaver.from_conn_string(
            redis_url, key_prefix=key_prefix, signing_key=keys, serde=serde()
        )

    with saver(OLD_KEY) as old:
        react_graph(2).compile(checkpointer=old).invoke(react_input("e"), cfg("e"))
    with saver([NEW_KEY, OLD_KEY]) as rotating:
        react_graph(4).compile(checkpointer=rotating).invoke(react_input("more"), cfg("e"))
        expected = messages(rotating, "e")
        assert all(r.ok for r in rotating.resign())
    with saver(NEW_KEY) as new:
        assert messages(new, "e") == expected
        assert new.recovery_report("e") is None
        report = new.verify("e")
        assert report.ok, report.findings
