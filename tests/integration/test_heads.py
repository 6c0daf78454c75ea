"""A signed thread's tail is fresh (heads.py): checkpoints removed behind the saver's
back (index member, record and writes) are reported like any damage, by reads and by
``verify``; the saver's own deletions (rollback, retention, copy) never look like one."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pytest
import redis
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, RedisSaver, ToolLedger
from langgraph_durable.core.errors import ToolOutcomeUnknownError
from tests.helpers import graphs

KEY = b"k" * 32


def cfg(thread_id: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **extra}}


def newest(thread_id: str) -> dict[str, Any]:
    return cfg(thread_id, checkpoint_ns="")


def remove_tail(client: redis.Redis, saver: RedisSaver, thread_id: str, count: int) -> list[str]:
    """What someone with write access does: the newest ``count`` root checkpoints go
    with their records, writes and run entries. Returns their ids."""
    tk = saver.keys.thread(thread_id)
    members = client.zrevrangebylex(tk.cps, "(\x01", "[\x00", start=0, num=count)
    for member in members:
        client.zrem(tk.cps, member)
        client.hdel(tk.cp, member)
        client.hdel(tk.runs, member)
        for write in client.zrangebylex(tk.wix, b"[" + member + b"\x00", b"(" + member + b"\x01"):
            client.zrem(tk.wix, write)
            client.hdel(tk.wr, write)
    return [m.decode().split("\x00")[-1] for m in members]


def signed(redis_url: str, key_prefix: str, **options: Any) -> Any:
    return RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY, **options)


def test_a_removed_tail_is_reported_by_reads_and_verify(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    with signed(redis_url, key_prefix) as saver:
        graphs.react_graph(rounds=3).compile(checkpointer=saver).invoke(
            graphs.react_input(), cfg("t")
        )
        assert saver.verify("t").ok
        removed = remove_tail(redis_client, saver, "t", 2)
    with signed(redis_url, key_prefix) as fresh, caplog.at_level(logging.WARNING):
        tup = fresh.get_tuple(newest("t"))
        assert tup is not None and tup.checkpoint["id"] < removed[-1]  # the older one
        report = fresh.recovery_report("t")
        assert report is not None and report.fell_back
        (skipped,) = report.skipped
        assert skipped.checkpoint_id == removed[0] and "signed head" in skipped.reason
        assert "newest checkpoints were removed" in caplog.text
        found = fresh.verify("t")
        assert not found.ok
        assert any(f.kind == "head" and removed[0] in f.reason for f in found.findings)


def test_a_removed_tail_and_head_is_reported_too(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with signed(redis_url, key_prefix) as saver:
        graphs.react_graph(rounds=2).compile(checkpointer=saver).invoke(
            graphs.react_input(), cfg("t")
        )
        remove_tail(redis_client, saver, "t", 1)
        redis_client.delete(saver.keys.thread("t").head)
    with signed(redis_url, key_prefix) as fresh:
        assert fresh.get_tuple(newest("t")) is not None
        report = fresh.recovery_report("t")
        assert report is not None and "missing: the signed head" in report.skipped[0].reason
        assert any(f.kind == "head" for f in fresh.verify("t").findings)


def assert_clean(redis_url: str, key_prefix: str, *threads: str) -> None:
    with signed(redis_url, key_prefix) as fresh:
        for thread in threads:
            assert fresh.get_tuple(newest(thread)) is not None
            assert fresh.recovery_report(thread) is None, fresh.recovery_report(thread)
            report = fresh.verify(thread)
            assert report.ok, report.findings


def test_the_savers_own_deletions_and_copies_keep_heads_true(
    redis_url: str, key_prefix: str
) -> None:
    with signed(redis_url, key_prefix, keep_last=3) as saver:
        graph = graphs.react_graph(rounds=3).compile(checkpointer=saver)
        graph.invoke(graphs.react_input(), cfg("t", run_id="r1"))
        graph.invoke(graphs.react_input("again"), cfg("t", run_id="r2"))
        saver.delete_for_runs(["r2"])  # a rollback removes the newest checkpoints
        saver.prune(["t"])
        saver.copy_thread("t", "copy")
    assert_clean(redis_url, key_prefix, "t", "copy")
    with signed(redis_url, key_prefix) as saver:
        saver.delete_for_runs(["r1"])  # every checkpoint: no head is left either
        assert saver.get_tuple(newest("t")) is None and saver.recovery_report("t") is None
        graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
        graph.invoke(graphs.react_input(), cfg("f"))
        graph.update_state(list(saver.list(cfg("f")))[-2].config, {"messages": []})  # a fork
        sub = graphs.subgraph_graph().compile(checkpointer=saver)
        sub.invoke({"log": []}, cfg("s"))  # waits in the subgraph's namespace
        sub.invoke(Command(resume="ok"), cfg("s"))
    assert_clean(redis_url, key_prefix, "f", "s")


def test_an_interrupted_signed_thread_reads_clean_and_resumes(
    redis_url: str, key_prefix: str
) -> None:
    with signed(redis_url, key_prefix) as saver:
        graph = graphs.approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": "r", "decision": ""}, cfg("a"), durability="exit")
        graph.invoke(Command(resume="yes"), cfg("a"))
    with signed(redis_url, key_prefix) as fresh:
        assert fresh.get_tuple(newest("a")).checkpoint["channel_values"]["request"] == "r [yes]"
        assert fresh.recovery_report("a") is None and fresh.verify("a").ok


async def test_the_async_saver_reports_a_removed_tail(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    async with AsyncRedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=KEY
    ) as saver:
        graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
        await graph.ainvoke(graphs.react_input(), cfg("t"))
        remove_tail(redis_client, saver, "t", 1)
    async with AsyncRedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=KEY
    ) as fresh:
        assert await fresh.aget_tuple(newest("t")) is not None
        assert "signed head" in fresh.recovery_report("t").skipped[0].reason


def test_an_unsigned_thread_has_no_head(saver: RedisSaver, redis_client: redis.Redis) -> None:
    graphs.react_graph(rounds=1).compile(checkpointer=saver).invoke(graphs.react_input(), cfg("u"))
    assert not redis_client.exists(saver.keys.thread("u").head)


# -- ledger marks -------------------------------------------------------------------------
class Log(TypedDict):
    log: Annotated[list[str], lambda a, b: a + b]


def test_a_replayed_intent_never_runs_a_finished_retry_call_again(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Someone with write access writes back a finished call's earlier signed intent
    record: the entry reads as tampered with and is escalated, never run again with the
    same idempotency key, whatever its policy says."""
    world: list[str] = []
    intent: dict[bytes, bytes] = {}
    crash = [True]
    with signed(redis_url, key_prefix) as saver:
        ledger = ToolLedger(saver)
        tk = saver.keys.thread("t")

        @ledger.durable(name="refund", policy="retry")
        def refund(amount: int) -> str:
            intent.update(redis_client.hgetall(tk.lg))  # the intent, as recorded before the call
            world.append(f"refund {amount}")
            return f"refunded {amount}"

        def work(state: Log) -> dict[str, Any]:
            done = refund(5)
            if crash:  # the worker dies after the call finished, before its step is saved
                crash.pop()
                raise RuntimeError("killed")
            return {"log": [done]}

        builder = StateGraph(Log)
        builder.add_node("work", work)
        builder.add_edge(START, "work")
        builder.add_edge("work", END)
        graph = builder.compile(checkpointer=saver)
        with pytest.raises(RuntimeError):
            graph.invoke({"log": []}, cfg("t"))
        (field,) = intent
        assert redis_client.hget(tk.lg, field) != intent[field]  # the result is recorded
        redis_client.hset(tk.lg, field, intent[field])  # the replay
    with signed(redis_url, key_prefix) as fresh:
        ledger = ToolLedger(fresh)
        (entry,) = ledger.entries("t")
        assert entry.state == "damaged" and "replayed" in (entry.damage or "")
        graph = builder.compile(checkpointer=fresh)
        try:
            out = graph.invoke(None, cfg("t"))
            assert "__interrupt__" in out  # escalated to a human
        except ToolOutcomeUnknownError:
            pass  # or refused outright: either way, not run
        assert world == ["refund 5"], "a finished call ran again"


def test_marks_follow_settles_copies_rotation_and_retention(
    redis_url: str, key_prefix: str
) -> None:
    """The saver's own rewrites of ledger records never read as replays."""
    with signed(redis_url, key_prefix) as saver:
        ledger = ToolLedger(saver)
        calls = [0]

        @ledger.durable(name="charge", policy="retry")
        def charge(amount: int) -> str:
            calls[0] += 1
            return f"charged {amount}"

        builder = StateGraph(Log)
        builder.add_node("work", lambda s: {"log": [charge(1), charge(2)]})
        builder.add_edge(START, "work")
        builder.add_edge("work", END)
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"log": []}, cfg("t"))
        saver.copy_thread("t", "copy")
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=[b"n" * 32, KEY]
    ) as rotating:
        assert all(r.ok for r in rotating.resign())
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, signing_key=b"n" * 32
    ) as new:
        for thread in ("t", "copy"):
            entries = ToolLedger(new).entries(thread)
            assert [e.state for e in entries] == ["result", "result"], entries
