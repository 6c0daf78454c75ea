"""Leases and fencing (core/fencing.py, lease.py) without a server: the lease plans and
what ``lease.lua`` replies, the token a context's writes carry, and the context managers
driven through a saver whose ``drive`` answers from a script."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_durable import lease as leases
from langgraph_durable.core import fencing
from langgraph_durable.core.errors import ConfigurationError, LeaseHeldError
from langgraph_durable.core.fencing import Lease
from langgraph_durable.core.ops import Plan, Script
from langgraph_durable.core.saver_core import SaverCore
from langgraph_durable.io.telemetry import NO_TELEMETRY
from tests.unit.scripted import PREFIX, THREAD, config, drive, make_core


def test_the_lease_script_gets_the_write_keys_and_its_arguments() -> None:
    core = make_core(ttl=90)
    lease = Lease(THREAD, "host:1:ab", ttl=2.5)
    token, (op,) = drive(core.acquire_lease(lease), ("lease", [1, b"1700000000000001"]))
    assert token == "1700000000000001" and isinstance(token, str)
    tk = core.keys.thread(THREAD)
    assert op.keys == tk.for_writes() and op.keys[-2:] == [tk.lease, tk.fence]
    # op, owner, lease ttl in ms, token (none to acquire), the thread's ttl for the fence
    assert op.args == ["acquire", "host:1:ab", 2500, "", 90]
    tiny = Lease(THREAD, "o", ttl=0.0001)
    _, (op,) = drive(core.acquire_lease(tiny), ("lease", [1, "5"]))
    assert op.args[2] == 1, "never a zero or negative PX"


def test_a_held_lease_names_its_holder_and_never_a_negative_wait() -> None:
    core = make_core()
    lease = Lease(THREAD, "me", ttl=1.0)
    with pytest.raises(LeaseHeldError) as raised:
        drive(core.acquire_lease(lease), ("lease", [0, b"other:2:cd", -1]))  # PTTL -1
    assert raised.value.holder == "other:2:cd" and raised.value.expires_in == 0
    assert raised.value.thread_id == THREAD


@pytest.mark.parametrize(("reply", "kept"), [(1, True), (0, False)])
def test_renew_and_release_send_the_held_token(reply: int, kept: bool) -> None:
    core = make_core()
    lease = Lease(THREAD, "me", ttl=1.0, token="77")
    renewed, (renew,) = drive(core.renew_lease(lease), ("lease", reply))
    released, (release,) = drive(core.release_lease(lease), ("lease", reply))
    assert renewed is kept and released is kept
    assert renew.args[:4] == ["renew", "me", 1000, "77"]
    assert release.args[:4] == ["release", "me", 1000, "77"]


def test_a_token_is_held_per_key_prefix_and_thread_and_unbinding_restores() -> None:
    outer = fencing.bind(PREFIX, THREAD, "1")
    try:
        inner = fencing.bind(PREFIX, "other", "2")
        assert fencing.held_token(PREFIX, THREAD) == "1"
        assert fencing.held_token(PREFIX, "other") == "2"
        assert fencing.held_token("another-prefix", THREAD) == ""
        fencing.unbind(inner)
        assert fencing.held_token(PREFIX, "other") == ""
        assert dict(fencing.current_leases()) == {(PREFIX, THREAD): "1"}
    finally:
        fencing.unbind(outer)
    assert fencing.held_token(PREFIX, THREAD) == ""


def test_a_lease_held_in_one_task_is_not_another_tasks_until_handed_on() -> None:
    async def main() -> tuple[str, str, str]:
        async def holder() -> dict[tuple[str, str], str]:
            fencing.bind(PREFIX, THREAD, "9")
            return dict(fencing.current_leases())

        held = await asyncio.create_task(holder())
        outside = fencing.held_token(PREFIX, THREAD)  # the task's context was a copy

        async def writer() -> str:
            return fencing.held_token(PREFIX, THREAD)

        # as lease.py hands them to code run on another thread's loop (a task of its own)
        handed = await asyncio.create_task(fencing.in_lease_context(held, writer()))
        return outside, handed, fencing.held_token(PREFIX, THREAD)

    assert asyncio.run(main()) == ("", "9", "")


def test_writes_made_in_a_lease_carry_its_token_and_others_do_not() -> None:
    core = make_core()

    def put_writes() -> Any:
        plan = core.put_writes(config("c1"), [("a", 1)], "task", "~0")
        _, (batch,) = drive(plan, ("batch:put_writes", [1]))
        return batch.commands[0].args[1]

    binding = fencing.bind(PREFIX, THREAD, "123")
    try:
        assert put_writes() == "123"
        # another thread of this process does not hold the lease
        other: list[Any] = []
        worker = threading.Thread(target=lambda: other.append(put_writes()))
        worker.start()
        worker.join()
        assert other == [""]
        # a copied context (what a pool hands a callback) does
        assert contextvars.copy_context().run(put_writes) == "123"
    finally:
        fencing.unbind(binding)
    assert put_writes() == ""


# -- the context managers (lease.py) ----------------------------------------------------------
class ScriptedSaver:
    """A saver whose ``drive`` answers each lease script call with the next reply queued
    for its op (acquire / renew / release), recording every call made."""

    def __init__(self, **replies: list[Any]) -> None:
        self.core: SaverCore = make_core()
        self.key_prefix = PREFIX
        self.telemetry = NO_TELEMETRY
        self.replies = replies
        self.calls: list[tuple[str, str]] = []  # (op, token)
        self.lock = threading.Lock()
        self.tokens_seen: list[str] = []

    def answer(self, op: Script) -> Any:
        assert isinstance(op, Script) and op.name == "lease"
        kind = op.args[0]
        with self.lock:
            self.calls.append((kind, op.args[3]))
            queue = self.replies[kind]
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def drive(self, plan: Plan[Any]) -> Any:
        reply: Any = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            reply = self.answer(op)

    async def adrive(self, plan: Plan[Any]) -> Any:
        return self.drive(plan)

    def ops(self, kind: str) -> list[str]:
        with self.lock:
            return [token for k, token in self.calls if k == kind]


def wait_for(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def test_hold_binds_the_token_for_the_block_and_releases_it_after() -> None:
    saver = ScriptedSaver(acquire=[[1, b"41"]], renew=[1], release=[1])
    with leases.hold(saver, {"configurable": {"thread_id": THREAD}}, ttl=30.0, wait=0) as lease:
        assert lease.token == "41" and fencing.held_token(PREFIX, THREAD) == "41"
        assert not lease.lost
    assert fencing.held_token(PREFIX, THREAD) == ""
    assert saver.ops("acquire") == [""] and saver.ops("release") == ["41"]
    assert saver.ops("renew") == [], "a block shorter than ttl/3 renews nothing"


def test_hold_waits_for_a_held_lease_then_gives_up_with_the_holders_error() -> None:
    saver = ScriptedSaver(acquire=[[0, b"other", 500], [0, b"other", 400], [1, b"8"]], release=[1])
    with leases.hold(saver, THREAD, ttl=30.0, wait=5.0) as lease:
        assert lease.token == "8"
    assert len(saver.ops("acquire")) == 3, "tried again every poll while waiting"
    stubborn = ScriptedSaver(acquire=[[0, b"other", 500]], release=[1])
    started = time.monotonic()
    with pytest.raises(LeaseHeldError) as raised, leases.hold(stubborn, THREAD, 30.0, 0.06):
        pass  # pragma: no cover - never acquired
    assert raised.value.holder == "other"
    assert 0.05 <= time.monotonic() - started < 1.0
    assert stubborn.ops("release") == [], "nothing to release"


def test_a_renewal_refused_marks_the_lease_lost_and_stops_renewing() -> None:
    saver = ScriptedSaver(acquire=[[1, b"5"]], renew=[1, 1, 0], release=[0])
    with leases.hold(saver, THREAD, ttl=0.015, wait=0) as lease:
        wait_for(lambda: lease.lost)
        renewed = len(saver.ops("renew"))
        time.sleep(0.03)  # a few more periods of ttl/3
        assert len(saver.ops("renew")) == renewed == 3, "no renewal once taken over"
        assert saver.ops("renew") == ["5", "5", "5"]
    assert saver.ops("release") == ["5"]


def test_a_renewal_that_fails_to_reach_redis_is_tried_again() -> None:
    saver = ScriptedSaver(acquire=[[1, b"5"]], renew=[ConnectionError("gone"), 1], release=[1])
    with leases.hold(saver, THREAD, ttl=0.015, wait=0) as lease:
        wait_for(lambda: len(saver.ops("renew")) >= 3)
        assert not lease.lost, "a connection fault is no takeover"


def test_a_release_that_fails_does_not_raise_from_the_block() -> None:
    saver = ScriptedSaver(acquire=[[1, b"5"]], release=[ConnectionError("gone")])
    with leases.hold(saver, THREAD, ttl=30.0, wait=0):
        pass
    assert fencing.held_token(PREFIX, THREAD) == ""


@pytest.mark.parametrize(("ttl", "wait"), [(0, 0), (0.003, 0), (-1, 0), (1.0, -0.1)])
def test_unsound_lease_options_are_refused_before_any_call(ttl: float, wait: float) -> None:
    saver = ScriptedSaver(acquire=[[1, b"5"]])
    with pytest.raises(ConfigurationError), leases.hold(saver, THREAD, ttl=ttl, wait=wait):
        pass  # pragma: no cover
    assert saver.calls == []


def test_ahold_binds_the_token_in_its_task_and_renews_on_the_loop() -> None:
    saver = ScriptedSaver(acquire=[[0, b"x", 10], [1, b"6"]], renew=[0], release=[1])

    async def main() -> tuple[str, bool, str]:
        async with leases.ahold(saver, THREAD, ttl=0.015, wait=1.0) as lease:
            inside = fencing.held_token(PREFIX, THREAD)
            for _ in range(200):
                if lease.lost:
                    break
                await asyncio.sleep(0.002)
            lost = lease.lost
        return inside, lost, fencing.held_token(PREFIX, THREAD)

    inside, lost, after = asyncio.run(main())
    assert (inside, lost, after) == ("6", True, "")
    assert saver.ops("renew") == ["6"] and saver.ops("release") == ["6"]
