"""``list`` without a namespace (what LangGraph Server calls): every namespace of a thread,
newest first, in O(log n) with no more records read than the limit needs, exact under
retention, damage, copies and threads whose timeline index is missing."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_durable import RedisSaver
from langgraph_durable.core.records import LIST_PAGE
from tests.helpers.plans import RoundTrips
from tests.helpers.redis_keys import flipped


def cfg(thread_id: str, ns: str | None = None, checkpoint_id: str | None = None) -> dict:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def fill(
    saver: RedisSaver, thread_id: str, namespaces: list[str], *, ids: list[str] | None = None
) -> list[tuple[str, str]]:
    """One checkpoint per entry of ``namespaces`` (each chained to the previous one of its
    namespace), with ``ids`` or fresh uuid6 ids; returns (id, ns) of each."""
    parents: dict[str, str] = {}
    stored = []
    for i, ns in enumerate(namespaces):
        cp = empty_checkpoint()
        cp["id"] = ids[i] if ids else str(uuid6(clock_seq=i))
        version = saver.get_next_version(None, None)
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": version}
        parent = cfg(thread_id, ns, parents.get(ns))
        saver.put(parent, cp, {"source": "loop", "step": i, "even": i % 2 == 0}, {"v": version})
        parents[ns] = cp["id"]
        stored.append((cp["id"], ns))
    return stored


def listed(saver: RedisSaver, config: dict, **kwargs: Any) -> list[tuple[str, str]]:
    return [
        (t.checkpoint["id"], t.config["configurable"]["checkpoint_ns"])
        for t in saver.list(config, **kwargs)
    ]


def newest_first(stored: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(stored, reverse=True)  # by id, then namespace, both descending


def test_every_namespace_newest_first_with_limit_before_filter_and_pages(
    saver: RedisSaver,
) -> None:
    rng = random.Random(7)
    namespaces = [rng.choice(["", "", "", "child:a", "child:b", "x|y:z"]) for _ in range(90)]
    stored = fill(saver, "mixed", namespaces)
    # Equal ids in two namespaces (a copy, a fork): the subgraph's sorts first.
    shared = str(uuid6(clock_seq=999))
    stored += fill(saver, "mixed", ["", "child:a"], ids=[shared, shared])
    expected = newest_first(stored)
    assert listed(saver, cfg("mixed")) == expected  # > LIST_PAGE: several pages
    for limit in (1, 5, LIST_PAGE, LIST_PAGE + 1, 200):
        assert listed(saver, cfg("mixed"), limit=limit) == expected[:limit]
    for pivot in (expected[0], expected[10], expected[-1], (shared, "")):
        below = [s for s in expected if s[0] < pivot[0]]
        got = listed(saver, cfg("mixed"), before=cfg("mixed", pivot[1], pivot[0]))
        assert got == below
        assert (
            listed(saver, cfg("mixed"), before=cfg("mixed", None, pivot[0]), limit=3) == below[:3]
        )
    evens = [s for s in expected if dict(stored_steps(saver, "mixed"))[s]["even"]]
    assert listed(saver, cfg("mixed"), filter={"even": True}) == evens
    assert listed(saver, cfg("mixed"), filter={"even": True}, limit=4) == evens[:4]
    # One namespace and one id still work as before.
    assert listed(saver, cfg("mixed", "child:b")) == [s for s in expected if s[1] == "child:b"]
    assert listed(saver, cfg("mixed", None, shared)) == [(shared, "child:a"), (shared, "")]


def stored_steps(saver: RedisSaver, thread_id: str) -> list[tuple[tuple[str, str], dict]]:
    return [
        ((t.checkpoint["id"], t.config["configurable"]["checkpoint_ns"]), t.metadata)
        for t in saver.list(cfg(thread_id))
    ]


@pytest.mark.parametrize("namespaces", ["root only", "with subgraphs"])
def test_reads_no_more_than_the_limit_in_one_or_two_round_trips(
    saver: RedisSaver, redis_url: str, namespaces: str
) -> None:
    """The shape that keeps list(limit=N) O(log n): one script call returns N records, and
    their N values come in the same round trip where this saver wrote or read those
    checkpoints last (it remembers their blob fields), else in one HMGET more, whatever
    the thread's length (3,000 checkpoints here)."""
    pattern = [""] if namespaces == "root only" else ["", "", "child:1", "child:2"]
    fill(saver, "long", [pattern[i % len(pattern)] for i in range(3000)])
    with RedisSaver.from_conn_string(redis_url, key_prefix=saver.keys.prefix) as fresh:
        # A saver that wrote or read them last: one round trip. One that never saw them
        # (another process): two, then one once it has read them.
        calls = [
            (saver, config, limit, 1)
            for config in (cfg("long"), cfg("long", ""))
            for limit in (1, 10)
        ]
        calls += [(fresh, cfg("long"), 10, 2), (fresh, cfg("long"), 10, 1)]
        for reader, config, limit, round_trips in calls:
            trips = RoundTrips(reader)
            assert len(list(reader.list(config, limit=limit))) == limit
            assert trips.checkpoints_read() == limit, "records read beyond the limit"
            assert trips.values_read(saver.keys.thread("long").bl) == limit
            assert trips.reset() == round_trips, "the records and their values"


def test_a_wrong_guess_costs_a_round_trip_never_a_wrong_list(
    saver: RedisSaver, redis_url: str
) -> None:
    """The values guessed are those of the checkpoints this saver last saw: after another
    writer added checkpoints, a list reads what the index returns and their values in a
    second round trip; with a filter it guesses nothing (it keeps what it cannot know)."""
    fill(saver, "shared", ["", "child:1"] * 6)
    assert len(listed(saver, cfg("shared"), limit=4)) == 4  # remembered: these four
    with RedisSaver.from_conn_string(redis_url, key_prefix=saver.keys.prefix) as other:
        newer = fill(other, "shared", ["", "child:1"] * 2)
    trips = RoundTrips(saver)
    assert listed(saver, cfg("shared"), limit=4) == newest_first(newer)
    assert trips.reset() == 2
    steps = dict(stored_steps(saver, "shared"))
    trips.reset()
    evens = listed(saver, cfg("shared"), filter={"even": True}, limit=3)
    assert len(evens) == 3 and all(steps[s]["even"] for s in evens)
    # One page (16 checkpoints); the values of exactly those it keeps, none guessed.
    assert trips.values_read(saver.keys.thread("shared").bl) == sum(
        m["even"] for m in steps.values()
    )


def test_a_page_in_the_middle_reads_only_its_own_values(saver: RedisSaver) -> None:
    """After a walk of the whole thread, the saver remembers the newest checkpoints, not
    the tail of the walk: a page below one it does not remember guesses nothing."""
    stored = newest_first(fill(saver, "walked", [""] * 300))
    assert len(listed(saver, cfg("walked"))) == 300
    trips = RoundTrips(saver)
    page = listed(saver, cfg("walked", ""), before=cfg("walked", "", stored[150][0]), limit=10)
    assert page == stored[151:161]
    assert trips.values_read(saver.keys.thread("walked").bl) == 10


def test_reads_back_in_time_and_walks_of_every_thread_teach_no_guess(
    saver: RedisSaver, redis_url: str
) -> None:
    """Time travel (get_tuple of old ids) and list(None) do not feed the guess: a page
    from the top afterwards reads exactly its own values."""
    stored = newest_first(fill(saver, "travel", [""] * 40))
    other = newest_first(fill(saver, "other", [""] * 8))
    with RedisSaver.from_conn_string(redis_url, key_prefix=saver.keys.prefix) as reader:
        for cid, _ in stored[20:25]:
            assert reader.get_tuple(cfg("travel", "", cid)) is not None
        assert reader.get_tuple(cfg("travel", "")) is not None
        trips = RoundTrips(reader)
        assert listed(reader, cfg("travel", ""), limit=10) == stored[:10]
        assert trips.values_read(saver.keys.thread("travel").bl) == 10
        assert len(list(reader.list(None))) == 48
        trips.reset()
        assert listed(reader, cfg("other", ""), limit=5) == other[:5]
        assert trips.reset() == 2, "list(None) taught the guess"


def test_the_timeline_follows_retention_copy_delete_and_quarantine(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    def timeline(thread_id: str) -> int:
        return redis_client.zcard(saver.keys.thread(thread_id).sub)

    stored = fill(saver, "kept", ["", "child:1", "", "child:1", "child:2", ""])
    assert timeline("kept") == 3
    saver.copy_thread("kept", "copy")
    assert timeline("copy") == 3 and listed(saver, cfg("copy")) == newest_first(stored)
    saver.prune(["kept"])  # keep_latest: the newest of each namespace stays
    assert timeline("kept") == 2
    assert listed(saver, cfg("kept")) == newest_first([stored[5], stored[3], stored[4]])
    # A damaged subgraph checkpoint is skipped and leaves both indexes.
    tk = saver.keys.thread("copy")
    member = saver.keys.checkpoint_member("child:2", stored[4][0])
    redis_client.hset(tk.cp, member, flipped(redis_client.hget(tk.cp, member)))
    assert listed(saver, cfg("copy")) == [s for s in newest_first(stored) if s != stored[4]]
    assert timeline("copy") == 2 and redis_client.zscore(tk.cps, member) is None
    saver.delete_thread("copy")
    assert timeline("copy") == 0


@pytest.mark.parametrize("reader", ["read-write", "read-only"])
def test_a_thread_without_its_timeline_is_listed_whole_and_reindexed(
    saver: RedisSaver,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    reader: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A thread written before the timeline existed (or whose ``sub`` key was evicted)
    lists every namespace all the same; a reader that may write puts the index back."""
    stored = fill(saver, "old", ["", "child:1", "", "child:2", "child:1"] * 10)
    tk = saver.keys.thread("old")
    redis_client.delete(tk.sub)
    repair = reader == "read-write"
    with (
        RedisSaver.from_conn_string(
            redis_url, key_prefix=key_prefix, repair_on_read=repair
        ) as other,
        caplog.at_level(logging.ERROR, "langgraph_durable"),
    ):
        assert listed(other, cfg("old")) == newest_first(stored)
        assert listed(other, cfg("old"), limit=7) == newest_first(stored)[:7]
    assert "index sub" in caplog.text
    assert redis_client.zcard(tk.sub) == (30 if repair else 0)
