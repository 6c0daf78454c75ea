"""Linear memory for dict-valued channels (a deep agent's ``files``: a dict merged one
document per step): each value stored once per thread, named by a sealed manifest of
keys and digests (``lgdm1``), and exact under retention, copy, damage, key rotation and
pending writes, on a real Redis with real graphs."""

from __future__ import annotations

from typing import Annotated, Any

import redis
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver
from langgraph_durable.core import codec, elements
from langgraph_durable.core.errors import RecordDamagedError
from tests.helpers.graphs import prose
from tests.helpers.redis_keys import flipped

KEY_A, KEY_B = "signing-key-a-0123456789", "signing-key-b-0123456789"


def merged(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    return {**old, **new}


class Files(TypedDict):
    n: int
    files: Annotated[dict[str, str], merged]


def documents_graph(steps: int) -> Any:
    builder = StateGraph(Files)
    builder.add_node(
        "write",
        lambda s: {"n": s["n"] + 1, "files": {f"docs/{s['n']:03d}.md": prose(5000, s["n"])}},
    )
    builder.add_edge(START, "write")
    builder.add_conditional_edges("write", lambda s: "write" if s["n"] < steps else END)
    return builder


def run(saver: Any, thread_id: str, steps: int) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": steps + 10}
    return documents_graph(steps).compile(checkpointer=saver).invoke({"n": 0, "files": {}}, config)


def latest(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def memory(client: redis.Redis, saver: RedisSaver, thread_id: str) -> int:
    return sum(client.memory_usage(k, samples=0) or 0 for k in saver.keys.thread(thread_id).all())


def payload(state: dict[str, Any]) -> int:
    return sum(len(text) for text in state["files"].values())


def test_a_dict_of_documents_costs_each_document_once(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    short, long = run(saver, "d20", 20), run(saver, "d40", 40)
    tk = saver.keys.thread("d40")
    assert redis_client.hlen(tk.el) == len(long["files"]) == 40  # one element per document
    ratios = [
        memory(redis_client, saver, t) / payload(s) for t, s in (("d20", short), ("d40", long))
    ]
    assert max(ratios) < 2.0, ratios  # whole dicts: 6x at 40 steps, growing with the steps
    assert ratios[1] < ratios[0] * 1.3, ratios  # about flat
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        read = fresh.get_tuple(latest("d40")).checkpoint["channel_values"]["files"]
        assert read == long["files"] and list(read) == list(long["files"])  # order kept
        history = list(fresh.list(latest("d40")))
        assert len(history[10].checkpoint["channel_values"]["files"]) < 40  # older: fewer
    assert saver.verify("d40").ok


def test_retention_keeps_what_the_newest_names_and_deletion_takes_all(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    out = run(saver, "kept", 10)
    saver.prune(["kept"], keep_last=1)
    tk = saver.keys.thread("kept")
    assert redis_client.hlen(tk.el) == 10  # every document is named by the newest
    assert saver.get_tuple(latest("kept")).checkpoint["channel_values"]["files"] == out["files"]
    assert saver.verify("kept").ok
    saver.delete_thread("kept")
    assert not any(redis_client.exists(k) for k in tk.all())


def test_a_copied_thread_outlives_its_source(saver: RedisSaver) -> None:
    out = run(saver, "source", 5)
    saver.copy_thread("source", "copy")
    saver.delete_thread("source")
    assert saver.get_tuple(latest("copy")).checkpoint["channel_values"]["files"] == out["files"]
    assert saver.verify("copy").ok


def test_a_damaged_document_is_never_read(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    out = run(saver, "hurt", 5)
    tk = saver.keys.thread("hurt")
    # the element of the last document (named by the newest checkpoint only): the same
    # bytes as that document alone in a dict (an element is its value serialized alone)
    _, alone = codec.blob_records(
        saver.core, "hurt", "x", "files", {"docs/004.md": out["files"]["docs/004.md"]}
    )
    (victim,) = alone.digests
    redis_client.hset(tk.el, victim, flipped(redis_client.hget(tk.el, victim)))
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(latest("hurt"))
        report = fresh.recovery_report("hurt")
        assert report is not None and report.fell_back
        assert f"checksum mismatch element {victim.hex()}" in report.skipped[0].reason
        files = tup.checkpoint["channel_values"]["files"]
        assert files == {k: v for k, v in out["files"].items() if k != "docs/004.md"}
        assert not redis_client.hexists(tk.el, victim)  # moved aside, its bytes kept
        assert redis_client.hexists(tk.qt, fresh.keys.quarantine_field("el", victim.hex()))


def test_a_key_rotation_re_keys_the_dicts_digests(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_A) as old:
        out = run(old, "signed", 4)
    rotated = RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[KEY_B, KEY_A]
    )
    with rotated as both:
        both.resign("signed")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_B) as new:
        assert new.verify("signed").ok  # the old key can go: every digest re-keyed
        assert new.get_tuple(latest("signed")).checkpoint["channel_values"]["files"] == out["files"]


def test_a_pending_write_of_a_dict_is_stored_as_a_manifest_and_reads_back(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    first = saver.put(
        latest("pw"),
        {"v": 4, "id": "1ef00001-0000-6000-8000-000000000000", "ts": "2026-11-26T00:00:00+00:00",
         "channel_values": {}, "channel_versions": {}, "versions_seen": {}},
        {"step": 0},
        {},
    )  # fmt: skip
    docs = {"a.md": prose(3000, 1), "b.md": prose(3000, 2)}
    saver.put_writes(first, [("files", docs)], task_id="task-1")
    tk = saver.keys.thread("pw")
    (record,) = redis_client.hvals(tk.wr)
    assert elements.PACKED_MARKS[1] in record  # lgdm1: keys and digests, not the text
    assert prose(3000, 1)[:100].encode() not in record
    (write,) = saver.get_tuple(first).pending_writes
    assert write[1:] == ("files", docs)


def test_a_reader_that_does_not_know_dict_manifests_refuses_them(saver: RedisSaver) -> None:
    """What a release before this one does with ``lgdm1``: its serializer does not know
    the type, so the value is refused as damage, never read as something else."""
    run(saver, "new-format", 2)
    field = max(f for f in saver.client.hkeys(saver.keys.thread("new-format").bl) if b"files" in f)
    record = saver.client.hget(saver.keys.thread("new-format").bl, field)
    type_, data = codec.open_record(saver.core, "bl", "new-format", field.decode(), record)
    assert type_ == elements.MAP_MARK
    try:
        codec.load_value(saver.core, type_, data)
    except RecordDamagedError as exc:
        assert "lgdm1" in exc.reason or "type" in exc.reason
    else:
        raise AssertionError("an lgdm1 manifest was read as a value")


class Context(TypedDict):
    n: int
    context: dict[str, Any]  # replaced whole at every step


def test_a_large_value_unchanged_inside_a_dict_that_changes_is_stored_once(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    """A channel rewritten at every step (no reducer) whose dict keeps a 50 KB document
    beside a counter: the document is one element for the whole thread."""
    document = prose(50_000, 7)
    builder = StateGraph(Context)
    builder.add_node(
        "step", lambda s: {"n": s["n"] + 1, "context": {"doc": document, "step": s["n"]}}
    )
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: "step" if s["n"] < 30 else END)
    config = {"configurable": {"thread_id": "big"}, "recursion_limit": 50}
    out = builder.compile(checkpointer=saver).invoke({"n": 0, "context": {}}, config)
    assert out["context"] == {"doc": document, "step": 29}
    tk = saver.keys.thread("big")
    (element,) = [e for e in redis_client.hvals(tk.el) if len(e) > 1000]  # the document, once
    values = [v for f, v in redis_client.hgetall(tk.bl).items() if b"context" in f]
    assert len(values) >= 30 and max(map(len, values)) < 200  # each names it: no copy
    assert len(element) < len(document)  # compressed
    assert saver.get_tuple(latest("big")).checkpoint["channel_values"]["context"]["doc"] == document


def test_a_channel_named_like_a_manifest_type_is_re_keyed_too(
    redis_url: str, key_prefix: str
) -> None:
    """A pending write's record is [channel, type, data]: a channel named ``lgdm1`` is
    not taken for the type when a key rotation re-keys the write's digests."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_A) as old:
        first = old.put(
            latest("named"),
            {"v": 4, "id": "1ef00001-0000-6000-8000-000000000000", "ts": "2026-11-26T00:00:00+00:00",
             "channel_values": {}, "channel_versions": {}, "versions_seen": {}},
            {"step": 0},
            {},
        )  # fmt: skip
        docs = {"a.md": prose(3000, 1), "b.md": prose(3000, 2)}
        old.put_writes(first, [(elements.MAP_MARK, docs)], task_id="task-1")
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[KEY_B, KEY_A]
    ) as both:
        both.resign("named")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_B) as new:
        assert new.verify("named").ok
        (write,) = new.get_tuple(first).pending_writes
        assert write[1:] == (elements.MAP_MARK, docs)
