"""One writer per thread: leases and fencing tokens, in-process and across real processes
(competing workers started together, a worker stopped with SIGSTOP past its lease)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import (
    AsyncRedisSaver,
    ConfigurationError,
    LeaseHeldError,
    LeaseLostError,
    RedisSaver,
)
from tests.helpers import graphs
from tests.helpers.kill_harness import ROOT, check_world, final_messages, reference_messages
from tests.helpers.ledger_agent import NON_IDEMPOTENT, ROUNDS, Effects
from tests.helpers.servers import wait_until_stopped


@pytest.fixture
def other(redis_url: str, key_prefix: str) -> Iterator[RedisSaver]:
    """A second worker: its own connection, the same data."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as s:
        yield s


def elsewhere(fn: Any, *args: Any) -> Any:
    """Run ``fn`` as another worker would: in a context that holds none of our leases."""
    return contextvars.Context().run(fn, *args)


def put_one(saver: RedisSaver, thread: str) -> dict[str, Any]:
    cp = empty_checkpoint()
    return saver.put(
        {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
        cp,
        {"source": "input", "step": -1},
        {},
    )


def test_a_held_lease_refuses_other_workers_until_released(
    saver: RedisSaver, other: RedisSaver
) -> None:
    with saver.lease("t", ttl=5) as lease:
        assert lease.token and not lease.lost
        with pytest.raises(LeaseHeldError) as held:
            elsewhere(lambda: other.lease("t").__enter__())
        assert held.value.holder == lease.owner and 0 < held.value.expires_in <= 5
        assert str(os.getpid()) in held.value.holder  # says which process holds it
        # writes without the lease are refused and change nothing
        with pytest.raises(LeaseHeldError, match="only the lease holder may write"):
            elsewhere(put_one, other, "t")
        assert other.get_tuple({"configurable": {"thread_id": "t"}}) is None
        put_one(saver, "t")  # the holder's own writes go through
        first = lease.token
    with other.lease("t") as second:  # released on exit: free at once
        assert int(second.token) > int(first)
    put_one(other, "t")  # nobody holds it: writes without a lease go ahead


def test_wait_takes_the_lease_once_the_holder_lets_go(saver: RedisSaver, other: RedisSaver) -> None:
    letting_go = threading.Event()

    def hold_briefly() -> None:
        with saver.lease("w", ttl=5):
            ready.set()
            time.sleep(0.4)  # the other is waiting meanwhile (or not yet: it passes too)
            letting_go.set()  # set before the lease is released, so never after it

    ready = threading.Event()
    holder = threading.Thread(target=hold_briefly)  # a new thread: a context of its own
    holder.start()
    assert ready.wait(60)
    with other.lease("w", wait=60) as lease:  # a safety net: it ends on the release
        assert letting_go.is_set() and lease.token
    holder.join()
    with saver.lease("w2", ttl=5):
        started = time.monotonic()
        with pytest.raises(LeaseHeldError):
            elsewhere(lambda: other.lease("w2", wait=0.2).__enter__())
        assert time.monotonic() - started >= 0.2


# A lease is renewed every ttl / 3: a ttl of a second and a half lets a renewal be late by
# a second on a loaded machine before the lease lapses, where 0.3 s allowed 0.2 s.
RENEWED_TTL = 1.5


def test_renewal_keeps_the_lease_past_its_ttl(saver: RedisSaver, other: RedisSaver) -> None:
    with saver.lease("r", ttl=RENEWED_TTL) as lease:
        time.sleep(RENEWED_TTL * 1.4)  # time itself is what is tested: past the first ttl
        with pytest.raises(LeaseHeldError):
            elsewhere(lambda: other.lease("r").__enter__())
        assert not lease.lost
    with other.lease("r"):
        pass


def test_bad_lease_options_are_refused(saver: RedisSaver) -> None:
    with pytest.raises(ConfigurationError, match="ttl"), saver.lease("x", ttl=0):
        pass
    with pytest.raises(ConfigurationError, match="wait"), saver.lease("x", wait=-1):
        pass


def test_a_graph_run_inside_the_lease_writes_with_its_token(
    saver: RedisSaver, other: RedisSaver
) -> None:
    """LangGraph writes checkpoints from its own worker threads: the token goes along."""
    graph = graphs.counter_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "g"}}
    with saver.lease("g"):
        out = graph.invoke({"value": 1, "trail": []}, config, durability="async")
        assert out["value"] > 1
        with pytest.raises(LeaseHeldError):
            elsewhere(
                graphs.counter_graph().compile(checkpointer=other).invoke,
                {"value": 1, "trail": []},
                config,
            )
    assert len(list(saver.list(config))) == len(list(other.list(config)))


async def test_alease_on_the_async_saver(redis_url: str, key_prefix: str) -> None:
    async with (
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver,
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as other,
    ):
        graph = graphs.counter_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "a"}}
        async with saver.alease("a", ttl=RENEWED_TTL) as lease:
            await asyncio.sleep(RENEWED_TTL * 1.4)  # past its first ttl: renewed meanwhile
            await graph.ainvoke({"value": 1, "trail": []}, config)
            other_graph = graphs.counter_graph().compile(checkpointer=other)

            async def another_worker() -> None:
                with pytest.raises(LeaseHeldError):
                    async with other.alease("a"):
                        pass
                with pytest.raises(LeaseHeldError):
                    await other_graph.ainvoke({"value": 1, "trail": []}, config)

            await asyncio.create_task(another_worker(), context=contextvars.Context())
            # the sync twin from another thread carries the lease onto the saver's loop
            state = await asyncio.to_thread(graph.get_state, config)
            await asyncio.to_thread(graph.update_state, config, {"value": 100})
            assert not lease.lost
        assert (await graph.aget_state(config)).values["value"] == 100
        assert state.values["value"] > 1


def test_a_lease_on_one_thread_leaves_others_free(saver: RedisSaver, other: RedisSaver) -> None:
    with saver.lease({"configurable": {"thread_id": "one"}}):  # a config names it too
        elsewhere(put_one, other, "two")
        with other.lease("two"):
            put_one(other, "two")


# -- across processes ---------------------------------------------------------------------
def start_worker(
    url: str, prefix: str, thread: str, tmp: Path, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.workers.lease_worker",
            url,
            prefix,
            thread,
            str(tmp / "effects"),
            str(tmp / "go"),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_together(workers: list[subprocess.Popen[str]], tmp: Path) -> None:
    """Let the workers go once every one is imported, connected and at the start line."""
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready", worker.communicate(timeout=120)
    (tmp / "go").touch()


def outcome(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def crash_mid_tool(url: str, prefix: str, thread: str, tmp: Path) -> None:
    """Start the thread and SIGKILL its worker right after a tool took effect."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.workers.ledger_worker",
            url,
            prefix,
            thread,
            str(tmp / "effects"),
        ]
        + ["sync", "sync", "tool_after_effect", "2"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_workers_resuming_one_thread_never_both_run_its_tools(
    redis_url: str, key_prefix: str, tmp_path: Path, mode: str
) -> None:
    crash_mid_tool(redis_url, key_prefix, "race", tmp_path)
    # Whichever takes the lease holds it, running nothing, until the other was refused.
    extra = ["--delay", "0.2", "--refused", str(tmp_path / "refused")]
    extra += ["--async"] if mode == "async" else []
    workers = [start_worker(redis_url, key_prefix, "race", tmp_path, *extra) for _ in range(2)]
    start_together(workers, tmp_path)
    outcomes = sorted(outcome(w)["outcome"] for w in workers)
    assert outcomes == ["LeaseHeldError", "done"]
    check_world(
        Effects(str(tmp_path / "effects")),
        final_messages(redis_url, key_prefix, "race"),
        reference_messages(redis_url),
    )


def test_without_leases_two_workers_do_repeat_effects(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """The control for the test above: the race it prevents is real."""
    # Each round, both read the ledger before either records an intent.
    extra = ["--delay", "0.3", "--no-lease", "--meet", str(tmp_path / "meet")]
    extra += ["--peers", "2", "--meet-rounds", str(ROUNDS)]
    workers = [start_worker(redis_url, key_prefix, "race", tmp_path, *extra) for _ in range(2)]
    start_together(workers, tmp_path)
    assert [outcome(w)["outcome"] for w in workers] == ["done", "done"]
    effects = [e for e in Effects(str(tmp_path / "effects")).lines() if e["kind"] == "effect"]
    emails = [e for e in effects if e["tool"] in NON_IDEMPOTENT]
    assert len(emails) > 2 * 3, "both workers ran the non-idempotent tools of a round"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_worker_back_from_a_stall_cannot_overwrite_the_new_owner(
    redis_url: str, key_prefix: str, tmp_path: Path, mode: str
) -> None:
    flavour = ["--async"] if mode == "async" else []
    (tmp_path / "go").touch()
    stalled = start_worker(
        redis_url, key_prefix, "stall", tmp_path, "--ttl", "2", "--stop-at-start", *flavour
    )
    wait_until_stopped(stalled)  # mid tool call, by itself: no renewals, the lease expires
    try:
        wait_until_lapsed(redis_url, key_prefix, "stall")
        new_owner = start_worker(redis_url, key_prefix, "stall", tmp_path, *flavour)
        finished = outcome(new_owner)
        assert finished["outcome"] == "done"
    finally:
        stalled.send_signal(signal.SIGCONT)
    came_back = outcome(stalled)
    assert came_back["outcome"] == "LeaseLostError", came_back
    assert "taken over by a newer one" in came_back["error"]
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": "stall"}})
        assert latest is not None
        assert latest.config["configurable"]["checkpoint_id"] == finished["checkpoint_id"]
        assert not latest.pending_writes
    assert final_messages(redis_url, key_prefix, "stall") == reference_messages(redis_url)


def wait_until_lapsed(url: str, prefix: str, thread: str) -> None:
    """Until the thread's lease key has expired in Redis (its holder is stopped)."""
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        key = saver.keys.thread(thread).lease
        deadline = time.monotonic() + 120  # a safety net: the wait ends on the expiry
        while saver.client.exists(key):
            assert time.monotonic() < deadline, "the stopped worker's lease never lapsed"
            time.sleep(0.02)


def test_a_stale_token_is_refused_atomically(saver: RedisSaver, other: RedisSaver) -> None:
    """What the stalled worker of the test above hits, in one process: its lease lapsed,
    another worker took the thread and wrote, and the old token is refused unapplied."""
    config = {"configurable": {"thread_id": "s"}}
    with saver.lease("s", ttl=5) as old:
        put_one(saver, "s")
        # The lapse SIGSTOP produces above, without the wait: the lease key goes away.
        saver.client.delete(saver.keys.thread("s").lease)

        def new_owner() -> str:
            with other.lease("s") as new:
                put_one(other, "s")
                return new.token

        newest = elsewhere(new_owner)
        assert int(newest) > int(old.token)
        before = [t.config for t in other.list(config)]
        with pytest.raises(LeaseLostError) as lost:
            put_one(saver, "s")
        assert lost.value.token == old.token and lost.value.newest == newest
        with pytest.raises(LeaseLostError):
            saver.put_writes(before[0], [("value", 1)], task_id="t1")
        assert [t.config for t in other.list(config)] == before
        assert other.get_tuple(before[0]).pending_writes == []
        # The renewer ends: a refused renewal marks the lease lost for good; a fault does not.
        from langgraph_durable.lease import _renewed

        assert _renewed(saver, old, ConnectionError("blip")) and not old.lost
        assert _renewed(saver, old, saver.drive(saver.core.renew_lease(old))) is False
        assert old.lost
