"""Never written is not lost: versions a checkpoint names with no value read as
InMemorySaver reads them; a value that was written and then lost is still caught.

The first calls of langgraph-checkpoint-redis's README ``put`` a hand-built checkpoint
with ``new_versions={}``; LangGraph renames channels when it loads an older checkpoint,
so the next checkpoint keeps a version under a name nobody stored. Both are compared
with InMemorySaver, the reference.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, CheckpointLostError, RedisSaver
from tests.helpers.plans import RoundTrips

WRITE = {"configurable": {"thread_id": "1", "checkpoint_ns": ""}}
READ = {"configurable": {"thread_id": "1"}}


def readme_checkpoint() -> dict[str, Any]:
    """langgraph-checkpoint-redis's README checkpoint, as printed there."""
    return {
        "v": 1,
        "ts": "2024-07-31T20:14:19.804150+00:00",
        "id": "1ef4f797-8335-6428-8001-8a1503f9b875",
        "channel_values": {"my_key": "meow", "node": "node"},
        "channel_versions": {"__start__": 2, "my_key": 3, "start:node": 3, "node": 3},
        "versions_seen": {
            "__input__": {},
            "__start__": {"__start__": 1},
            "node": {"start:node": 2},
        },
        "pending_sends": [],
    }


def child_of(parent: dict[str, Any], checkpoint_id: str, **changes: Any) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["id"] = checkpoint_id
    cp["channel_versions"] = {
        **parent["channel_versions"],
        **{c: v for c, (v, _) in changes.items()},
    }
    cp["channel_values"] = {c: value for c, (_, value) in changes.items()}
    return cp


def seen(saver: Any) -> tuple[dict[str, Any], int]:
    """What a user of the README sees: the values ``get`` returns, how many ``list`` has."""
    loaded = saver.get(READ)
    return (loaded["channel_values"] if loaded else None), len(list(saver.list(READ)))


@pytest.fixture
def ours(redis_url: str, key_prefix: str) -> Iterator[RedisSaver]:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        yield saver


@pytest.fixture
def another(redis_url: str, key_prefix: str) -> Iterator[RedisSaver]:
    """A second saver on the same data: it knows nothing ``ours`` wrote or read."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        yield saver


def test_the_readme_example_reads_as_in_memory_saver_reads_it(
    ours: RedisSaver, caplog: pytest.LogCaptureFixture
) -> None:
    reference = InMemorySaver()
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    for saver in (reference, ours):
        saver.put(WRITE, readme_checkpoint(), {}, {})
    assert seen(ours) == seen(reference) == ({}, 1)
    assert ours.get(READ)["channel_versions"] == readme_checkpoint()["channel_versions"]
    assert not caplog.records, "nothing is reported damaged"
    assert ours.recovery_report("1") is None


async def test_the_async_readme_example_reads_as_in_memory_saver_reads_it(
    redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    reference = InMemorySaver()
    await reference.aput(WRITE, readme_checkpoint(), {}, {})
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        await saver.aput(WRITE, readme_checkpoint(), {}, {})
        loaded = await saver.aget(READ)
        listed = [c async for c in saver.alist(READ)]
    expected = await reference.aget(READ)
    assert loaded["channel_values"] == expected["channel_values"] == {}
    assert len(listed) == 1
    assert not caplog.records


@pytest.mark.parametrize("fresh", [False, True], ids=["same saver", "fresh saver"])
def test_a_child_that_keeps_never_written_versions_is_accepted(
    ours: RedisSaver, another: RedisSaver, fresh: bool
) -> None:
    """A put whose parent names versions without values, keeping some of them: accepted
    (with a fresh saver, which must read the parent to know), read as InMemorySaver."""
    reference = InMemorySaver()
    child = child_of(
        readme_checkpoint(), "1ef4f797-8335-6428-8002-000000000000", my_key=(4, "purr")
    )
    for saver in (reference, ours):
        parent_config = saver.put(WRITE, readme_checkpoint(), {}, {})
        if saver is ours and fresh:
            saver = another
        saver.put(parent_config, child, {"step": 1}, {"my_key": 4})
    assert seen(ours) == seen(reference) == ({"my_key": "purr"}, 2)


def test_a_channel_renamed_on_load_reads_as_in_memory_saver(
    ours: RedisSaver, another: RedisSaver
) -> None:
    """LangGraph migrates an older checkpoint when it loads it: a channel renamed keeps
    its version, under a name whose value was never stored. A fresh process builds on it
    in three round trips (the write, the parent's record, the write again); no damage."""
    reference = InMemorySaver()
    parent = empty_checkpoint()
    parent["id"] = "1ef4f797-8335-6428-8002-000000000000"
    parent["channel_versions"] = {"branch:old": "00003.0.5", "kept": "00002.0.1"}
    parent["channel_values"] = {"branch:old": "route", "kept": "value"}
    child = empty_checkpoint()
    child["id"] = "1ef4f797-8335-6428-8003-000000000000"
    child["channel_versions"] = {
        "branch:to:old": "00003.0.5",
        "kept": "00002.0.1",
        "n": "00004.0.2",
    }
    child["channel_values"] = {"branch:to:old": "route", "kept": "value", "n": 1}
    configs = {}
    for saver in (reference, ours):
        configs[saver] = saver.put(WRITE, parent, {}, dict(parent["channel_versions"]))
    trips = RoundTrips(another)
    another.put(configs[ours], child, {"step": 1}, {"n": "00004.0.2"})
    assert trips.reset() == 3
    # the next put builds on a parent this saver wrote: one round trip again
    grandchild = {**child, "id": "1ef4f797-8335-6428-8004-000000000000"}
    another.put(
        {"configurable": {"thread_id": "1", "checkpoint_ns": "", "checkpoint_id": child["id"]}},
        grandchild, {"step": 2}, {},
    )  # fmt: skip
    assert trips.reset() == 1
    reference.put(configs[reference], child, {"step": 1}, {"n": "00004.0.2"})
    values, count = seen(ours)
    assert values == {"kept": "value", "n": 1} and count == 3
    assert reference.get_tuple(
        {"configurable": {"thread_id": "1", "checkpoint_ns": "", "checkpoint_id": child["id"]}}
    ).checkpoint["channel_values"] == {"kept": "value", "n": 1}
    assert ours.recovery_report("1") is None


@pytest.mark.parametrize("fresh", [False, True], ids=["same saver", "fresh saver"])
def test_a_value_written_and_then_lost_is_still_caught(
    ours: RedisSaver, another: RedisSaver, redis_client: redis.Redis, fresh: bool
) -> None:
    """A version the parent names, whose value is gone (a field deleted, as a bad restore
    or a hostile operator would): the read falls back and reports it, and a child that
    keeps it is refused, whether or not this saver knew the parent."""
    first = empty_checkpoint()
    first["id"] = "1ef4f797-8335-6428-8008-000000000000"
    first["channel_versions"] = {"a": "00001.0.1"}
    first["channel_values"] = {"a": "stored"}
    first_config = ours.put(WRITE, first, {"step": 0}, {"a": "00001.0.1"})
    second = child_of(first, "1ef4f797-8335-6428-8009-000000000000", b=("00002.0.1", "also"))
    second_config = ours.put(first_config, second, {"step": 1}, {"b": "00002.0.1"})
    keys = ours.keys.thread("1")
    assert redis_client.hdel(keys.bl, ours.keys.blob_field("", "a", "00001.0.1")) == 1
    saver = another if fresh else ours
    third = child_of(second, "1ef4f797-8335-6428-800a-000000000000", c=("00003.0.1", 3))
    with pytest.raises(CheckpointLostError, match="'a'@00001.0.1 it passes on is missing"):
        saver.put(second_config, third, {"step": 2}, {"c": "00003.0.1"})
    assert saver.get_tuple(READ) is None, "nothing verifies: no checkpoint is returned"
    report = saver.recovery_report("1")
    assert report is not None and "missing channel value 'a'" in report.skipped[0].reason


def test_a_never_written_record_that_goes_missing_is_loss_too(
    ours: RedisSaver, redis_client: redis.Redis
) -> None:
    """The "empty" record the put stored for a never-written version is what a later
    read checks: deleted, the checkpoint is damaged (the write-time record is gone)."""
    ours.put(WRITE, readme_checkpoint(), {}, {})
    bl = ours.keys.thread("1").bl
    assert redis_client.hlen(bl) == 4, "one record per never-written version"
    redis_client.hdel(bl, ours.keys.blob_field("", "my_key", 3))
    assert ours.get(READ) is None
    assert "missing channel value 'my_key'" in ours.recovery_report("1").skipped[0].reason


def test_a_value_stored_under_a_never_written_version_stays(ours: RedisSaver) -> None:
    """A kept version whose value another checkpoint stored is not replaced by the
    never-written record (HSETNX)."""
    first = empty_checkpoint()
    first["id"] = "1ef4f797-8335-6428-800f-000000000000"
    first["channel_versions"] = {"a": "00001.0.1"}
    first["channel_values"] = {"a": "stored"}
    ours.put(
        {"configurable": {"thread_id": "1", "checkpoint_ns": ""}}, first, {}, {"a": "00001.0.1"}
    )
    orphan = {**first, "id": "1ef4f797-8335-6428-8010-000000000000", "channel_values": {}}
    ours.put(WRITE, orphan, {}, {})  # no parent: names a:1 without writing it
    assert ours.get_tuple(
        {"configurable": {"thread_id": "1", "checkpoint_ns": "", "checkpoint_id": orphan["id"]}}
    ).checkpoint["channel_values"] == {"a": "stored"}


class AB(TypedDict):
    a: str
    b: str


def ab_graph() -> Any:
    builder = StateGraph(AB)
    builder.add_node("n1", lambda s: {"a": "important"})
    builder.add_node("n2", lambda s: {"b": "work of n2"})
    builder.add_edge(START, "n1")
    builder.add_edge("n1", "n2")
    builder.add_edge("n2", END)
    return builder


@pytest.mark.parametrize("source", ["newest", "root"])
def test_a_copy_of_a_checkpoint_whose_value_was_lost_is_refused(
    ours: RedisSaver, redis_client: redis.Redis, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``update_state(config, None, as_node="__copy__")`` puts a copy that keeps every
    version of its source, on the source's parent (none for the root). A value of the
    source lost between LangGraph's read and the put is a value lost, never "never
    written": the copy is refused and the source reads as damaged, not silently without
    it."""
    graph = ab_graph().compile(checkpointer=ours)
    config = {"configurable": {"thread_id": "1"}}
    graph.invoke({"a": "", "b": ""}, config)
    history = list(ours.list(config))
    chosen = history[0] if source == "newest" else history[-1]
    versions = chosen.checkpoint["channel_versions"]
    channel = "b" if source == "newest" else next(iter(versions))
    field = ours.keys.blob_field("", channel, versions[channel])
    put = RedisSaver.put

    def lose_then_put(self: RedisSaver, *args: Any) -> Any:
        redis_client.hdel(ours.keys.thread("1").bl, field)  # evicted, a bad restore...
        return put(self, *args)

    monkeypatch.setattr(RedisSaver, "put", lose_then_put)
    with pytest.raises(CheckpointLostError, match=f"'{channel}'@{versions[channel]}"):
        graph.update_state(chosen.config, None, as_node="__copy__")
    monkeypatch.undo()
    assert len(list(ours.list(config))) == len(history) - 1, "no copy; the source is damaged"
    report = ours.verify("1")
    assert not report.ok and chosen.checkpoint["id"] in str(report)
