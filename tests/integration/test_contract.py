"""Checkpointer contract details other Redis savers get wrong, one test each."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import (
    ERROR,
    INTERRUPT,
    RESUME,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import (
    AsyncRedisSaver,
    ConfigurationError,
    InvalidConfigError,
    RedisSaver,
)
from langgraph_durable.core.ops import Batch, Command, Script
from langgraph_durable.core.recent import RECENT
from langgraph_durable.core.records import LIST_PAGE
from tests.helpers.plans import RoundTrips, elements_sent


def config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put(
    saver: RedisSaver,
    thread_id: str,
    values: dict[str, Any],
    *,
    parent: dict | None = None,
    ns: str = "",
    metadata: dict | None = None,
    versions: dict[str, str] | None = None,
    checkpoint_id: str | None = None,
) -> dict[str, Any]:
    cp = empty_checkpoint()
    if checkpoint_id:
        cp["id"] = checkpoint_id
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = versions or {k: saver.get_next_version(None, None) for k in values}
    new_versions = {k: cp["channel_versions"][k] for k in values}
    cfg = parent or config(thread_id, ns)
    return saver.put(cfg, cp, metadata or {"source": "loop", "step": 0}, new_versions)


def test_writes_before_put_are_kept(saver: RedisSaver) -> None:
    """durability='async': put_writes for a checkpoint may arrive before its put."""
    checkpoint_id = str(uuid6(clock_seq=-1))
    target = config("early", checkpoint_id=checkpoint_id)
    saver.put_writes(target, [("a", 1), ("b", 2)], task_id="t1", task_path="~p")
    assert saver.get_tuple(target) is None  # no checkpoint yet
    put(saver, "early", {"x": 1}, checkpoint_id=checkpoint_id)
    tup = saver.get_tuple(target)
    assert tup is not None and tup.pending_writes == [("t1", "a", 1), ("t1", "b", 2)]
    # A repeated put of the same checkpoint neither hides nor clobbers them.
    put(saver, "early", {"x": 1}, checkpoint_id=checkpoint_id)
    assert saver.get_tuple(config("early")).pending_writes == [("t1", "a", 1), ("t1", "b", 2)]


class _Token(bytes):
    """A bytes subclass (as numpy.bytes_ is): LangGraph's serializer passes it through."""


class _Buffer(bytearray):
    pass


def test_values_of_bytes_subclasses_are_kept_as_inmemorysaver_keeps_them(
    saver: RedisSaver,
) -> None:
    for value, expected in ((_Token(b"abc"), b"abc"), (_Buffer(b"abc"), bytearray(b"abc"))):
        thread = f"bytes-{type(value).__name__}"
        stored = put(saver, thread, {"raw": value})
        tup = saver.get_tuple(stored)
        assert tup is not None and tup.checkpoint["channel_values"]["raw"] == expected
        saver.put_writes(stored, [("raw", value)], task_id="t1")
        tup = saver.get_tuple(stored)
        assert tup is not None and tup.pending_writes == [("t1", "raw", expected)]


def test_pending_writes_order_first_write_wins_and_special_overwrite(saver: RedisSaver) -> None:
    stored = put(saver, "order", {"x": 1})
    saver.put_writes(stored, [("late", "z")], task_id="task-b", task_path="~2")
    saver.put_writes(stored, [("c1", "first"), ("c2", "second")], task_id="task-a", task_path="~1")
    saver.put_writes(stored, [("early", "y")], task_id="task-c", task_path="~0")
    # Regular writes: first write wins per (task, idx).
    saver.put_writes(stored, [("c1", "REPLACED")], task_id="task-a", task_path="~1")
    # Special channels overwrite.
    saver.put_writes(stored, [(INTERRUPT, "i1")], task_id="task-a", task_path="~1")
    saver.put_writes(stored, [(INTERRUPT, "i2")], task_id="task-a", task_path="~1")
    saver.put_writes(stored, [(ERROR, "e1"), (RESUME, "r1")], task_id="task-b", task_path="~2")
    writes = saver.get_tuple(stored).pending_writes
    assert writes == [
        ("task-c", "early", "y"),
        ("task-a", INTERRUPT, "i2"),
        ("task-a", "c1", "first"),
        ("task-a", "c2", "second"),
        ("task-b", RESUME, "r1"),
        ("task-b", ERROR, "e1"),
        ("task-b", "late", "z"),
    ]


def test_list_across_threads_filters_before_and_root_namespace(saver: RedisSaver) -> None:
    ids = []
    for step in range(3):
        parent = config("t1", checkpoint_id=ids[-1]) if ids else None
        stored = put(
            saver,
            "t1",
            {"v": step},
            parent=parent,
            metadata={"source": "loop", "step": step, "owner": "ann" if step else "bob"},
        )
        ids.append(stored["configurable"]["checkpoint_id"])
    put(saver, "t2", {"v": 9}, metadata={"source": "input", "step": -1, "owner": "ann"})
    put(saver, "t1", {"v": 7}, ns="child:1", metadata={"source": "loop", "step": 0, "owner": "ann"})

    everything = list(saver.list(None))
    assert {t.config["configurable"]["thread_id"] for t in everything} == {"t1", "t2"}
    assert len(everything) == 5
    anns = list(saver.list(None, filter={"owner": "ann"}))
    assert len(anns) == 4
    assert [
        t.metadata["step"] for t in saver.list(config("t1"), filter={"owner": "ann", "step": 2})
    ] == [2]
    root = list(saver.list(config("t1", "")))
    assert [t.checkpoint["id"] for t in root] == ids[::-1]
    before = list(saver.list(config("t1", ""), before=config("t1", checkpoint_id=ids[2])))
    assert [t.checkpoint["id"] for t in before] == [ids[1], ids[0]]
    assert [t.checkpoint["id"] for t in saver.list(config("t1", ""), limit=2)] == ids[:0:-1]
    all_ns = list(saver.list({"configurable": {"thread_id": "t1"}}))
    assert len(all_ns) == 4
    assert [t.checkpoint["id"] for t in all_ns] == sorted(
        (t.checkpoint["id"] for t in all_ns), reverse=True
    )
    assert list(saver.list(None, limit=0)) == []


def test_round_trips(saver: RedisSaver) -> None:
    trips = RoundTrips(saver)
    stored = None
    for step in range(70):
        stored = put(
            saver,
            "rt",
            {"v": step, "big": "x" * 100},
            parent=stored,
            metadata={"source": "loop", "step": step},
        )
    assert trips.reset() == 70, "put is one round trip"
    saver.put_writes(stored, [("a", 1), ("b", 2), (ERROR, "e")], task_id="t")
    assert trips.reset() == 1, "put_writes is one round trip"
    assert saver.get_tuple(config("rt")) is not None
    assert trips.reset() == 1, "get_tuple(latest) of a thread this saver wrote: one round trip"
    assert saver.get_tuple(stored) is not None
    assert trips.reset() == 1, "get_tuple of a checkpoint id this saver wrote: one round trip"
    assert len(list(saver.list(config("rt"), limit=10))) == 10
    assert trips.reset() == 1, "a page of list of checkpoints this saver wrote: one"
    assert len(list(saver.list(config("rt")))) == 70
    assert RECENT + RECENT // 2 < 2 * LIST_PAGE  # not every field of page two is kept
    assert trips.reset() == 1 + 2 + 2, "70 checkpoints are three pages; two older than RECENT"
    assert all(isinstance(op, (Script, Command, Batch)) for op in trips.ops)


def test_get_tuple_reads_the_values_it_guessed_along_with_the_checkpoint(
    saver: RedisSaver, redis_url: str, key_prefix: str
) -> None:
    """The newest checkpoint's value fields, as this saver last saw them, are read in the
    same round trip as the checkpoint; a stale guess costs one more, never a wrong value."""
    versions = {"a": saver.get_next_version(None, None), "b": saver.get_next_version(None, None)}
    first = put(saver, "guess", {"a": "A" * 1000, "b": "B"}, versions=versions)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as other:
        cold = RoundTrips(other)
        assert other.get_tuple(config("guess")).checkpoint["channel_values"]["b"] == "B"
        assert cold.reset() == 2, "a saver that never saw the thread reads the values after"
        assert other.get_tuple(config("guess")) is not None
        assert cold.reset() == 1, "... and guesses them the next time"
        # another writer moves the thread on: `saver`'s guess for channel b is stale
        cp = empty_checkpoint()
        cp["channel_values"] = {"a": "A" * 1000, "b": "B2"}
        cp["channel_versions"] = {
            "a": versions["a"],
            "b": other.get_next_version(versions["b"], None),
        }
        other.put(first, cp, {"source": "loop", "step": 1}, {"b": cp["channel_versions"]["b"]})
    trips = RoundTrips(saver)
    assert saver.get_tuple(config("guess")).checkpoint["channel_values"] == {
        "a": "A" * 1000,
        "b": "B2",
    }
    assert len(trips.ops) == 2
    hmgets = [
        c for op in trips.ops if isinstance(op, Batch) for c in op.commands if isinstance(c, tuple)
    ]
    assert [c[2:] for c in hmgets] == [
        tuple(sorted(saver.keys.blob_field("", ch, v) for ch, v in versions.items())),
        (saver.keys.blob_field("", "b", cp["channel_versions"]["b"]),),
    ], "only the value the guess missed is read again"
    assert trips.reset() == 2


def test_unchanged_channels_are_not_rewritten(saver: RedisSaver, redis_client: redis.Redis) -> None:
    versions = {"a": saver.get_next_version(None, None), "b": saver.get_next_version(None, None)}
    first = put(saver, "blobs", {"a": "A" * 1000, "b": "B"}, versions=versions)
    keys = saver.keys.thread("blobs")
    assert redis_client.hlen(keys.bl) == 2
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": "A" * 1000, "b": "B2"}
    cp["channel_versions"] = {"a": versions["a"], "b": saver.get_next_version(versions["b"], None)}
    trips = RoundTrips(saver)
    saver.put(first, cp, {"source": "loop", "step": 1}, {"b": cp["channel_versions"]["b"]})
    (op,) = trips.ops
    (script,) = op.commands  # the changed value is small: it goes inside the script call
    field_b = saver.keys.blob_field("", "b", cp["channel_versions"]["b"])
    parent = saver.keys.checkpoint_member("", first["configurable"]["checkpoint_id"])
    field_a = saver.keys.blob_field("", "a", versions["a"])  # kept: checked, not sent
    # ARGV 9 (no element named without being sent), 10 K, the kept field the parent
    # names, 11+K U (none never written) and when, 13+K+2U E, "sent", S (none sent
    # ahead), I (no element inside), the small value's field and record, and no head
    # (unsigned: heads.py)
    record_b = script.args[-3]
    assert script.args[7:] == [
        parent, b"", 1, field_a, 0, "renamed", 0, "sent", 0, 0, field_b, record_b, "", ""
    ]  # fmt: skip
    assert redis_client.hlen(keys.bl) == 3
    assert saver.get_tuple(config("blobs")).checkpoint["channel_values"] == {
        "a": "A" * 1000,
        "b": "B2",
    }


@pytest.mark.parametrize("writes_first", [True, False], ids=["writes first", "put first"])
def test_a_new_message_goes_to_redis_once(
    saver: RedisSaver, redis_client: redis.Redis, writes_first: bool
) -> None:
    """A task's new message reaches Redis in its pending write and again in the channel
    value of the next checkpoint: its element is sent once, by whichever of the two
    LangGraph stores first (durability "async" stores them in either order); the
    checkpoint names it without sending it, and its put checks it first."""
    from langchain_core.messages import AIMessage

    history = [AIMessage(content=f"old {i} " * 40, id=f"m{i}") for i in range(3)]
    parent = put(saver, f"once-{writes_first}", {"messages": history})
    new = AIMessage(content="a new answer " * 40, id="new")
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [*history, new]}
    cp["channel_versions"] = {"messages": saver.get_next_version(None, None) + "x"}
    trips = RoundTrips(saver)
    keys = saver.keys.thread(f"once-{writes_first}")

    def the_put() -> None:
        saver.put(parent, cp, {"source": "loop", "step": 1}, dict(cp["channel_versions"]))

    if not writes_first:
        the_put()
    saver.put_writes(parent, [("messages", [new])], task_id="agent", task_path="~a")
    if writes_first:
        the_put()
    sent = [d for op in trips.ops for d in elements_sent(op, keys.el)]
    assert len(sent) == len(set(sent)) == 1, sent
    tup = saver.get_tuple(config(f"once-{writes_first}"))
    assert tup is not None and tup.checkpoint["channel_values"]["messages"][-1].id == "new"


def test_key_prefixes_isolate_savers(redis_url: str, key_prefix: str) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix + "-a") as a,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix + "-b") as b,
    ):
        put(a, "shared", {"v": "from a"})
        assert b.get_tuple(config("shared")) is None
        assert list(b.list(None)) == []
        put(b, "shared", {"v": "from b"})
        assert a.get_tuple(config("shared")).checkpoint["channel_values"] == {"v": "from a"}
        b.delete_thread("shared")
        assert a.get_tuple(config("shared")) is not None
        a.delete_thread("shared")


def test_ttl_covers_every_key_and_is_refreshed(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=100) as saver:
        old = saver.get_next_version(None, None)
        first = put(saver, "ttl", {"kept": "old value"}, versions={"kept": old})
        keys = saver.keys.thread("ttl")
        for key in (keys.cps, keys.cp, keys.bl):
            assert 90 <= redis_client.ttl(key) <= 100, key
        assert not redis_client.exists(keys.runs), "no run id, no run index entry"
        redis_client.expire(keys.bl, 5)  # as if the old value were written long ago
        cp = empty_checkpoint()
        cp["channel_values"] = {"kept": "old value"}
        cp["channel_versions"] = {"kept": old}
        saver.put(first, cp, {"source": "loop", "step": 1}, {})  # no new values at all
        assert redis_client.ttl(keys.bl) > 90, "a value the thread still references lives on"
        saver.put_writes(saver.get_tuple(config("ttl")).config, [("w", 1)], task_id="t")
        assert redis_client.ttl(keys.wix) > 90 and redis_client.ttl(keys.wr) > 90


def test_serde_is_pluggable_and_encrypted_data_is_opaque(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    serde = (
        EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
        if _has_crypto()
        else None
    )
    if serde is None:
        pytest.skip("pycryptodome not installed")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=serde) as saver:
        put(saver, "secret", {"card": "4111-1111-1111-1111"})
        assert saver.get_tuple(config("secret")).checkpoint["channel_values"] == {
            "card": "4111-1111-1111-1111"
        }
        raw = b"".join(redis_client.hvals(saver.keys.thread("secret").bl))
        assert b"4111" not in raw


def _has_crypto() -> bool:
    try:
        import Crypto  # noqa: F401
    except ImportError:
        return False
    return True


def test_default_serde_does_not_unpickle(saver: RedisSaver) -> None:
    assert isinstance(saver.serde, JsonPlusSerializer) or hasattr(saver.serde, "serde")
    assert getattr(saver.serde, "pickle_fallback", False) is False


def test_bad_input_gets_typed_errors(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match="decode_responses=False"):
        RedisSaver(redis.Redis.from_url(redis_url, decode_responses=True))
    with pytest.raises(ConfigurationError, match="redis.asyncio"):
        AsyncRedisSaver(redis.Redis.from_url(redis_url))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not contain"):
        RedisSaver(redis.Redis.from_url(redis_url), key_prefix="a{b}")
    with pytest.raises(ConfigurationError, match="ttl"):
        RedisSaver(redis.Redis.from_url(redis_url), ttl=-5)
    saver = RedisSaver(redis.Redis.from_url(redis_url))
    with pytest.raises(InvalidConfigError, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidConfigError, match="checkpoint_id"):
        saver.put_writes(config("x"), [("a", 1)], task_id="t")
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["x"], strategy="keep_none")


def test_prune_empty_list_and_copy_thread_chain(saver: RedisSaver) -> None:
    saver.prune([])
    stored = None
    for step in range(4):
        stored = put(
            saver, "src", {"v": step}, parent=stored, metadata={"source": "loop", "step": step}
        )
        saver.put_writes(stored, [("w", step)], task_id=f"task{step}")
    saver.copy_thread("src", "dst")
    src = list(saver.list(config("src")))
    dst = list(saver.list(config("dst")))
    assert _comparable(src) == _comparable(dst)
    assert [t.parent_config["configurable"]["thread_id"] for t in dst if t.parent_config] == [
        "dst"
    ] * 3
    saver.prune(["src"])
    assert len(list(saver.list(config("src")))) == 1
    assert len(list(saver.list(config("dst")))) == 4


def _comparable(tuples: list[CheckpointTuple]) -> list[Any]:
    return [
        (
            t.checkpoint["id"],
            t.checkpoint["channel_values"],
            t.metadata,
            t.pending_writes,
            t.parent_config and t.parent_config["configurable"]["checkpoint_id"],
        )
        for t in tuples
    ]


def test_ttl_expiry_deletes_the_whole_thread(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=1) as saver:
        put(saver, "short", {"v": 1})
        keys = saver.keys.thread("short").all()
        # Wait for the expiry itself, of every key (they may lapse some ms apart, and a
        # read finding the index gone says nothing of the rest); the deadline is only a
        # safety net.
        deadline = time.monotonic() + 60
        while any(redis_client.exists(k) for k in keys):
            assert time.monotonic() < deadline, "the thread's keys did not expire"
            time.sleep(0.05)
        assert saver.get_tuple(config("short")) is None
