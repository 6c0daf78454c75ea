"""Blocked manifests (blocks.py): a long list's or dict's manifest names blocks of 64
entries stored once, so a checkpoint of a long thread costs a few digests, not one per
element; exact under reads, history, forks, retention, rollback, copy, damage, a lost
block, key rotation and an older reader, on a real Redis with real graphs."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver
from langgraph_durable.core import codec, elements
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.manifests import BLOCK_ENTRIES, BLOCKED_MARK, blocked_in
from tests.helpers.plans import RoundTrips, elements_sent
from tests.helpers.redis_keys import flipped

KEY_A, KEY_B = "signing-key-a-0123456789", "signing-key-b-0123456789"
PER_STEP = 8


class Docs(TypedDict):
    n: int
    stop: int
    docs: Annotated[list[str], operator.add]
    files: Annotated[dict[str, str], lambda old, new: {**old, **new}]


def graph(saver: Any) -> Any:
    """A list and a dict that gain ``PER_STEP`` entries at every step."""
    builder = StateGraph(Docs)

    def step(s: Docs) -> dict[str, Any]:
        new = [f"doc {s['n']}.{i} " * 10 for i in range(PER_STEP)]
        return {
            "n": s["n"] + 1,
            "docs": new,
            "files": {f"f{s['n']}.{i}": d for i, d in enumerate(new)},
        }

    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["n"] >= s["stop"] else "step")
    return builder.compile(checkpointer=saver)


def config(thread_id: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **more}, "recursion_limit": 200}


def run(saver: Any, thread_id: str, steps: int) -> dict[str, Any]:
    return graph(saver).invoke({"n": 0, "stop": steps, "docs": [], "files": {}}, config(thread_id))


def newest_record(client: redis.Redis, saver: RedisSaver, thread_id: str, channel: str) -> bytes:
    version = saver.get_tuple(config(thread_id)).checkpoint["channel_versions"][channel]
    field = saver.keys.blob_field("", channel, version)
    return client.hget(saver.keys.thread(thread_id).bl, field) or b""


def opened(saver: RedisSaver, thread_id: str, record: bytes, channel: str) -> tuple[str, Any]:
    version = saver.get_tuple(config(thread_id)).checkpoint["channel_versions"][channel]
    field = saver.keys.blob_field("", channel, version)
    return codec.open_record(saver.core, "bl", thread_id, field, record)  # type: ignore[return-value]


def history(saver: Any, thread_id: str) -> list[dict[str, Any]]:
    return [t.checkpoint["channel_values"] for t in saver.list(config(thread_id))]


def test_a_long_lists_checkpoint_names_blocks_and_reads_back_as_written(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    steps = 25  # 200 entries: three blocks and a tail of 8
    out = run(saver, "long", steps)
    reference = InMemorySaver()
    run(reference, "long", steps)
    for channel in ("docs", "files"):
        record = newest_record(redis_client, saver, "long", channel)
        type_, data = opened(saver, "long", record, channel)
        assert type_ == BLOCKED_MARK
        assert len(blocked_in(data).blocks) == steps * PER_STEP // BLOCK_ENTRIES
        assert len(record) < 700  # a few digests, not 200 of them (3.2 KB)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        cold = RoundTrips(fresh)
        tup = fresh.get_tuple(config("long"))
        assert tup.checkpoint["channel_values"]["docs"] == out["docs"]
        assert tup.checkpoint["channel_values"]["files"] == out["files"]
        assert list(tup.checkpoint["channel_values"]["files"]) == list(out["files"])
        assert cold.reset() <= 4  # the checkpoint, its values, their blocks, their elements
        assert fresh.get_tuple(config("long")) == tup
        assert cold.reset() == 1  # a thread it knows: one round trip
        assert history(fresh, "long") == history(reference, "long")
    assert saver.verify("long").ok


def test_a_put_of_a_known_thread_sends_no_block_again(saver: RedisSaver) -> None:
    """Blocks are elements: a put leaves out those its parent names, and each block is
    sent once, by the put that first fills it."""
    trips = RoundTrips(saver)
    out = run(saver, "sent", 24)
    tk = saver.keys.thread("sent")
    sent = [d for op in trips.ops for d in elements_sent(op, tk.el, writes=False)]
    blocks = {
        d
        for d in sent
        if (saver.client.hget(tk.el, d) or b"").startswith((b"lgdl1\x00", b"lgdm1\x00"))
    }
    assert len(blocks) == 2 * (len(out["docs"]) // BLOCK_ENTRIES)  # docs' and files'
    assert all(sent.count(d) == 1 for d in blocks)


def test_forks_and_rollbacks_read_what_they_named(saver: RedisSaver) -> None:
    out = run(saver, "fork", 20)
    history_ = list(saver.list(config("fork")))
    old = next(t for t in history_ if len(t.checkpoint["channel_values"].get("docs", [])) == 72)
    compiled = graph(saver)
    forked = compiled.update_state(old.config, {"docs": ["edited " * 20]})
    again = compiled.invoke(None, {**forked, "recursion_limit": 200})
    assert again["docs"][:72] == out["docs"][:72] and again["docs"][72] == "edited " * 20
    assert len(again["docs"]) == 72 + 1 + PER_STEP * (20 - 9)
    assert saver.get_tuple(config("fork")).checkpoint["channel_values"]["docs"] == again["docs"]
    assert saver.get_tuple(old.config).checkpoint["channel_values"]["docs"] == out["docs"][:72]
    assert saver.verify("fork").ok


@pytest.mark.parametrize("how", ["prune", "delete_for_runs"])
def test_retention_keeps_every_block_and_element_the_kept_checkpoints_name(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str, how: str
) -> None:
    expected = run(saver, "kept", 18)
    if how == "prune":
        saver.prune(["kept"], keep_last=1)
    else:  # a second run, then rolled back: the first run's newest is the newest again
        second = {**config("kept", run_id="r2"), "metadata": {"run_id": "r2"}}
        graph(saver).invoke({"stop": 26}, second)  # as LangGraph Server runs it
        assert len(saver.get_tuple(config("kept")).checkpoint["channel_values"]["docs"]) == 208
        saver.delete_for_runs(["r2"])
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        values = fresh.get_tuple(config("kept")).checkpoint["channel_values"]
        assert values["docs"] == expected["docs"] and values["files"] == expected["files"]
        assert fresh.verify("kept").ok
    tk = saver.keys.thread("kept")
    # a doc is one element for the list and the dict (the same bytes), each has blocks
    named = len(expected["docs"]) + 2 * (len(expected["docs"]) // BLOCK_ENTRIES)
    assert redis_client.hlen(tk.el) == named  # nothing more: the rest went
    saver.delete_thread("kept")
    assert not any(redis_client.exists(k) for k in tk.all())


def test_a_copied_thread_outlives_its_source(saver: RedisSaver) -> None:
    out = run(saver, "src", 17)
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    assert saver.get_tuple(config("dst")).checkpoint["channel_values"]["docs"] == out["docs"]
    assert saver.verify("dst").ok


def _a_block(client: redis.Redis, saver: RedisSaver, thread_id: str) -> bytes:
    record = newest_record(client, saver, thread_id, "docs")
    return blocked_in(opened(saver, thread_id, record, "docs")[1]).blocks[0]


def test_a_damaged_block_is_never_read_and_the_next_put_writes_it_again(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    out = run(saver, "hurt", 9)  # 72 entries: one block, named by the newest two only
    tk = saver.keys.thread("hurt")
    block = _a_block(redis_client, saver, "hurt")
    good = redis_client.hget(tk.el, block)
    redis_client.hset(tk.el, block, flipped(good))
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(config("hurt"))
        report = fresh.recovery_report("hurt")
        assert report is not None and report.fell_back
        assert f"checksum mismatch element {block.hex()}" in report.skipped[0].reason
        assert len(tup.checkpoint["channel_values"]["docs"]) < BLOCK_ENTRIES
        assert not redis_client.hexists(tk.el, block)  # moved aside, its bytes kept
        assert redis_client.hexists(tk.qt, fresh.keys.quarantine_field("el", block.hex()))
        assert not fresh.verify("hurt").ok  # until the worker sends the block again
    graph(saver).invoke({"stop": 10}, config("hurt"))  # the worker's next put
    assert redis_client.hget(tk.el, block) == good
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert (
            fresh.get_tuple(config("hurt")).checkpoint["channel_values"]["docs"][:72] == out["docs"]
        )
        assert fresh.recovery_report("hurt") is None


def test_a_manifest_read_before_opens_again_only_when_its_bytes_change(
    saver: RedisSaver, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read takes the digests a manifest record it opened before names (the element
    cache keeps them by thread, field and the record's very bytes); a record changed in
    Redis is opened and verified again, so damage is still found; ``verify`` still finds
    a lost block."""
    out = run(saver, "memo", 25)
    tk = saver.keys.thread("memo")
    newest = saver.get_tuple(config("memo"))  # opens both manifests, blocks and all
    versions = newest.checkpoint["channel_versions"]
    docs, files = (saver.keys.blob_field("", c, versions[c]) for c in ("docs", "files"))
    seen: list[str] = []
    real = codec.manifest_of
    monkeypatch.setattr(
        codec, "manifest_of", lambda ctx, t, f, r: seen.append(f) or real(ctx, t, f, r)
    )
    again = saver.get_tuple(config("memo"))
    assert again == newest and again.checkpoint["channel_values"]["docs"] == out["docs"]
    assert docs not in seen and files not in seen
    record = redis_client.hget(tk.bl, docs)
    redis_client.hset(tk.bl, docs, flipped(record))
    fallen = saver.get_tuple(config("memo"))
    assert docs in seen
    report = saver.recovery_report("memo")
    assert report is not None and report.fell_back
    assert fallen.checkpoint["channel_values"]["docs"] == out["docs"][:-PER_STEP]
    older = saver.keys.blob_field("", "docs", fallen.checkpoint["channel_versions"]["docs"])
    opened_before = len(seen)
    saver.get_tuple(config("memo"))
    assert older not in seen[opened_before:]  # opened by the fallback's read: known now
    seen.clear()
    redis_client.hdel(tk.el, _a_block(redis_client, saver, "memo"))
    assert not saver.verify("memo").ok  # the lost block, though this process knows it


def test_a_missing_block_keeps_every_element_through_retention(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    run(saver, "lost", 9)
    tk = saver.keys.thread("lost")
    block = _a_block(redis_client, saver, "lost")
    redis_client.hdel(tk.el, block)
    before = redis_client.hlen(tk.el)
    saver.prune(["lost"], keep_last=1)
    # What the block named is unknown: no element may go for an orphan.
    assert redis_client.hlen(tk.el) == before


def test_a_key_rotation_re_keys_blocks_and_what_they_name(redis_url: str, key_prefix: str) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_A) as old:
        out = run(old, "signed", 9)
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[KEY_B, KEY_A]
    ) as both:
        both.resign("signed")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY_B) as new:
        assert new.verify("signed").ok  # the old key can go: every block re-keyed
        values = new.get_tuple(config("signed")).checkpoint["channel_values"]
        assert values["docs"] == out["docs"] and values["files"] == out["files"]


def test_a_reader_that_does_not_know_blocks_refuses_them(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    """What a release before this one does with ``lgdb1``: its serializer does not know
    the type, so the value is refused as damage, never read as something else."""
    run(saver, "format", 9)
    type_, data = opened(
        saver, "format", newest_record(redis_client, saver, "format", "docs"), "docs"
    )
    assert type_ == BLOCKED_MARK
    with pytest.raises(RecordDamagedError):
        codec.load_value(saver.core, type_, data)
    assert elements.may_be_manifest(newest_record(redis_client, saver, "format", "docs"))


def test_a_cache_emptied_during_a_read_costs_no_fallback(redis_url: str, key_prefix: str) -> None:
    """A read leaves out the elements (and blocks) its process holds; the cache may be
    emptied (full) by what the same read adds before they are loaded: they are pinned
    for the read, never reported missing (a worker would fall back past its own
    newest checkpoint)."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker:
        worker.core.element_cache.max_bytes = 20_000  # fills within a read or a put
        out = run(worker, "small", 25)
        for _ in range(3):
            tup = worker.get_tuple(config("small"))
            assert worker.recovery_report("small") is None
            assert tup.checkpoint["channel_values"]["docs"] == out["docs"]
            assert tup.checkpoint["channel_values"]["files"] == out["files"]
