"""A Redis that stops answering without closing the connection (SIGSTOP: a paused VM, a
partition, a machine gone without a TCP reset) blocks no run forever: a reply later than
the client's ``socket_timeout`` is a lost server for the failover budget
(``io/deadlines.py``, ``io/failover.py``). Real servers, real signals; the tests wait on
events (the saver's own "lost Redis" warning), never on time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import AsyncRedisSaver, FailoverTimeoutError, RedisSaver
from langgraph_durable.io import deadlines
from tests.crash.test_failover import steps_graph
from tests.helpers.servers import start_server, wait_until_stopped

SAFETY = 60.0  # seconds: a hung run fails the test instead of the suite


class Lost(logging.Handler):
    """Set once the saver logs that it lost Redis (the failover budget started)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        if "lost Redis" in record.getMessage():
            self.last = record.getMessage()
            self.seen.set()


@pytest.fixture
def lost() -> Any:
    handler = Lost()
    logger = logging.getLogger("langgraph_durable")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_a_saver_made_from_a_url_has_deadlines_and_keepalive(tmp_path: Path) -> None:
    server = start_server(str(tmp_path))
    try:
        with RedisSaver.from_conn_string(server.url) as saver:
            kwargs = saver.client.connection_pool.connection_kwargs
            assert kwargs["socket_timeout"] == deadlines.READ_TIMEOUT
            assert kwargs["socket_connect_timeout"] == deadlines.CONNECT_TIMEOUT
            assert kwargs["socket_keepalive"] is True
        with RedisSaver.from_conn_string(
            server.url, wait_for_replicas=1, replica_timeout=4
        ) as saver:  # WAIT may take replica_timeout inside the round trip
            kwargs = saver.client.connection_pool.connection_kwargs
            assert kwargs["socket_timeout"] == deadlines.READ_TIMEOUT + 4
        with RedisSaver.from_conn_string(server.url, socket_timeout=30) as saver:
            assert saver.client.connection_pool.connection_kwargs["socket_timeout"] == 30
    finally:
        server.stop()


def test_a_client_passed_without_a_read_deadline_is_warned_about(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client handed in keeps its own deadlines; one that would wait forever (redis-py
    before 8.0 had no default socket_timeout) is named as the saver takes it."""
    import redis
    import redis.asyncio

    warned = "has no socket_timeout"
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        RedisSaver(redis.Redis.from_url(redis_url, socket_timeout=None))
        assert warned in caplog.text
        caplog.clear()
        RedisSaver(redis.Redis.from_url(redis_url, socket_timeout=3))
        assert warned not in caplog.text
    asynchronous = redis.asyncio.Redis.from_url(redis_url, socket_timeout=None)
    assert deadlines.read_deadline(asynchronous) == (True, None)


def test_a_frozen_server_fails_the_run_within_the_budget(tmp_path: Path, lost: Lost) -> None:
    """SIGSTOPped mid-thread: the next round trip gets no reply; after ``socket_timeout``
    it is a lost server, and past ``failover_timeout`` (counted from when it was sent)
    the run fails with ``FailoverTimeoutError`` instead of hanging."""
    server = start_server(str(tmp_path))
    try:
        with RedisSaver.from_conn_string(
            server.url, key_prefix="lgdlive", failover_timeout=1.0, socket_timeout=0.5
        ) as saver:
            graph = steps_graph(lambda: None).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "frozen"}}
            graph.invoke({"trail": []}, config)
            server.proc.send_signal(signal.SIGSTOP)
            wait_until_stopped(server.proc)
            started = time.monotonic()
            with pytest.raises(FailoverTimeoutError, match="failover_timeout=1"):
                graph.invoke({"trail": []}, config)
            # the budget (1 s) plus at most one attempt in flight (0.5 s) and backoff
            assert time.monotonic() - started < 1.0 + 0.5 + 1.5
            assert lost.seen.is_set()
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


def test_a_server_frozen_for_less_than_the_budget_costs_no_run(tmp_path: Path, lost: Lost) -> None:
    """Resumed once the saver noticed (its "lost Redis" warning), the run goes on and
    finishes as if nothing happened."""
    server = start_server(str(tmp_path))
    try:
        with RedisSaver.from_conn_string(
            server.url, key_prefix="lgdlive", failover_timeout=30.0, socket_timeout=0.5
        ) as saver:
            graph = steps_graph(lambda: None).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "paused"}}
            server.proc.send_signal(signal.SIGSTOP)
            wait_until_stopped(server.proc)

            def resume() -> None:
                if lost.seen.wait(SAFETY):
                    server.proc.send_signal(signal.SIGCONT)

            waker = threading.Thread(target=resume)
            waker.start()
            result = graph.invoke({"trail": []}, config)
            waker.join(SAFETY)
            assert lost.seen.is_set()
            assert result["trail"] == graph.get_state(config).values["trail"]
            assert len(result["trail"]) > 0
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


def test_an_async_run_on_a_frozen_server_fails_within_the_budget(
    tmp_path: Path, lost: Lost
) -> None:
    server = start_server(str(tmp_path))

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(
            server.url, key_prefix="lgdlive", failover_timeout=1.0, socket_timeout=0.5
        ) as saver:
            graph = steps_graph(lambda: None).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "frozen-async"}}
            await graph.ainvoke({"trail": []}, config)
            server.proc.send_signal(signal.SIGSTOP)
            wait_until_stopped(server.proc)
            started = time.monotonic()
            with pytest.raises(FailoverTimeoutError):
                await asyncio.wait_for(graph.ainvoke({"trail": []}, config), SAFETY)
            assert time.monotonic() - started < 1.0 + 0.5 + 1.5

    try:
        asyncio.run(run())
        assert lost.seen.is_set()
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize("ledger", [False, True])
def test_a_server_that_keeps_losing_its_scripts_fails_no_run(tmp_path: Path, ledger: bool) -> None:
    """Scripts flushed again and again while the run goes (as when a failover lands the
    calls on a primary that never had them between the load and the call): every path
    (a script alone, a batch of them, the ledger's) sends the source itself after a
    second NOSCRIPT, so no ``NoScriptError`` reaches the run."""
    import redis as redis_py

    from langgraph_durable import ToolLedger

    server = start_server(str(tmp_path))
    done = threading.Event()

    def flush() -> None:
        admin = redis_py.Redis(port=server.port)
        try:
            while not done.is_set():
                admin.script_flush()
        finally:
            admin.close()

    flusher = threading.Thread(target=flush)
    try:
        with RedisSaver.from_conn_string(server.url, key_prefix="lgdlive") as saver:
            calls: list[str] = []
            record = ToolLedger(saver).durable(name="note")(calls.append) if ledger else None

            def at_node() -> None:
                if record is not None:
                    record("x")

            graph = steps_graph(at_node).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "flushed"}}
            flusher.start()
            for _ in range(3):
                graph.invoke({"trail": []}, config)
            done.set()
            flusher.join(SAFETY)
            assert saver.get_tuple(config) is not None
            assert calls == (["x"] * 3 if ledger else [])
    finally:
        done.set()
        server.stop()


def test_a_wait_cut_short_by_a_demotion_is_no_raw_error(tmp_path: Path) -> None:
    """A write blocked in its WAIT (its replica frozen) when its primary is demoted:
    Redis unblocks WAIT with "UNBLOCKED ... (master -> replica?)". That is a server state
    that passes (the write goes again, to whatever is primary then), never redis-py's raw
    ResponseError; here nothing is primary again, so the budget ends it, typed."""
    import redis as redis_py
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_durable import DurableError

    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_server(str(tmp_path / "p"))
    replica = start_server(
        str(tmp_path / "r"), "--save", "", "--replicaof", "127.0.0.1", str(primary.port)
    )
    other = start_server(str(tmp_path))
    admin = redis_py.Redis(port=primary.port)
    try:
        while admin.info("replication").get("connected_slaves") != 1:
            time.sleep(0.01)
        with RedisSaver.from_conn_string(
            primary.url, key_prefix="lgdunblock", wait_for_replicas=1, replica_timeout=30,
            failover_timeout=1.0,
        ) as saver:  # fmt: skip
            replica.proc.send_signal(signal.SIGSTOP)  # WAIT now blocks for replica_timeout
            raised: list[BaseException] = []
            config = {"configurable": {"thread_id": "unblocked", "checkpoint_ns": ""}}

            def put() -> None:
                try:
                    saver.put(config, empty_checkpoint(), {}, {})
                except BaseException as exc:  # noqa: BLE001 - what the test looks at
                    raised.append(exc)

            writer = threading.Thread(target=put)
            writer.start()
            while not any(c.get("cmd") == "wait" for c in admin.client_list()):
                time.sleep(0.01)  # the put's WAIT is blocked on the server
            admin.replicaof("127.0.0.1", other.port)  # demoted under it
            writer.join(SAFETY)
            (error,) = raised
            assert isinstance(error, DurableError), repr(error)
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        for server in (replica, other, primary):
            server.stop()


def test_a_primary_demoted_under_a_running_worker_is_waited_out(tmp_path: Path, lost: Lost) -> None:
    """REPLICAOF turns the worker's server into a replica (a managed endpoint that moved
    while the connection still reaches the old primary): its writes are refused with
    READONLY, which is a lost server for the budget; writable again, the run goes on."""
    import redis as redis_py

    primary, other = start_server(str(tmp_path)), start_server(str(tmp_path))
    admin, helper = redis_py.Redis(port=primary.port), redis_py.Redis(port=other.port)

    def in_sync() -> bool:
        info = admin.info("replication")
        return info["role"] == "slave" and info.get("master_link_status") == "up"

    try:
        with RedisSaver.from_conn_string(
            primary.url, key_prefix="lgdlive", failover_timeout=60.0
        ) as saver:
            graph = steps_graph(lambda: None).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "demoted"}}
            graph.invoke({"trail": []}, config)
            helper.replicaof("127.0.0.1", primary.port)  # the other holds the same data
            while helper.info("replication").get("master_link_status") != "up":
                time.sleep(0.01)
            helper.replicaof("no", "one")
            admin.replicaof("127.0.0.1", other.port)  # demoted
            while not in_sync():
                time.sleep(0.01)

            def promote() -> None:
                if lost.seen.wait(SAFETY):
                    admin.replicaof("no", "one")

            waker = threading.Thread(target=promote)
            waker.start()
            result = graph.invoke({"trail": []}, config)
            waker.join(SAFETY)
            assert lost.seen.is_set() and "ReadOnlyError" in lost.last
            assert result["trail"] == graph.get_state(config).values["trail"]
    finally:
        admin.close()
        helper.close()
        primary.stop()
        other.stop()


def test_writes_paused_by_the_server_are_waited_out(tmp_path: Path, lost: Lost) -> None:
    """``CLIENT PAUSE ... WRITE`` (an operator's failover, a managed service's
    maintenance): the write gets no reply within ``socket_timeout``, is sent again
    within the budget, and lands once the pause ends."""
    import redis as redis_py

    server = start_server(str(tmp_path))
    admin = redis_py.Redis(port=server.port)
    try:
        with RedisSaver.from_conn_string(
            server.url, key_prefix="lgdlive", failover_timeout=60.0, socket_timeout=0.5
        ) as saver:
            graph = steps_graph(lambda: None).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "paused-writes"}}
            admin.execute_command("CLIENT", "PAUSE", 60000, "WRITE")

            def unpause() -> None:
                if lost.seen.wait(SAFETY):
                    admin.execute_command("CLIENT", "UNPAUSE")

            waker = threading.Thread(target=unpause)
            waker.start()
            result = graph.invoke({"trail": []}, config)
            waker.join(SAFETY)
            assert lost.seen.is_set()
            assert result["trail"] == graph.get_state(config).values["trail"]
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
        server.stop()


def test_a_lease_learns_it_is_lost_once_its_ttl_passed_without_a_renewal(
    tmp_path: Path,
) -> None:
    """Redis frozen while a worker holds a thread: no renewal gets through, and once the
    lease's ttl has passed since the last one that did, ``lease.lost`` says so (without
    a round trip: the server's lease may now be another worker's)."""
    server = start_server(str(tmp_path))
    try:
        with (
            RedisSaver.from_conn_string(
                server.url, key_prefix="lgdlive", failover_timeout=0.5, socket_timeout=0.3
            ) as saver,
            saver.lease("held", ttl=1.5) as lease,
        ):
            assert not lease.lost
            server.proc.send_signal(signal.SIGSTOP)
            wait_until_stopped(server.proc)
            frozen = time.monotonic()
            deadline = frozen + SAFETY
            while not lease.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lease.lost and not lease.taken_over
            assert time.monotonic() - frozen <= 1.5 + 0.5  # within its ttl (and a poll)
            server.proc.send_signal(signal.SIGCONT)
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


def test_an_async_write_a_frozen_server_stops_reading_fails_within_the_budget(
    tmp_path: Path, lost: Lost
) -> None:
    """A write bigger than the socket's buffers to a SIGSTOPped server: the send itself
    waits (no reply is ever read), and ``socket_timeout`` bounds that wait as it bounds a
    read: the run fails within the failover budget instead of hanging. (Python 3.12's
    asyncio ``writelines`` never pauses a plain socket's transport: the bytes wait in the
    process, the send returns, and the reply's deadline is the one that fails the run,
    within the same budget.)"""
    server = start_server(str(tmp_path))

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(
            server.url, key_prefix="lgdlive", failover_timeout=1.0, socket_timeout=0.5
        ) as saver:
            config = {"configurable": {"thread_id": "frozen-send", "checkpoint_ns": ""}}
            checkpoint = empty_checkpoint()
            await saver.aput(config, checkpoint, {}, {})  # connected, scripts loaded
            server.proc.send_signal(signal.SIGSTOP)
            wait_until_stopped(server.proc)
            big = empty_checkpoint()
            big["channel_values"] = {"blob": os.urandom(64 << 20)}  # incompressible
            big["channel_versions"] = {"blob": "1"}
            started = time.monotonic()
            with pytest.raises(FailoverTimeoutError):
                await asyncio.wait_for(saver.aput(config, big, {}, {"blob": "1"}), SAFETY)
            assert time.monotonic() - started < 1.0 + 0.5 + 1.5 + 2.0  # + serializing

    try:
        asyncio.run(run())
        assert lost.seen.is_set()
        if sys.version_info < (3, 12):  # the transport paused: the send's own deadline
            assert "Timeout writing to socket" in lost.last
        else:
            assert "Timeout writing to socket" in lost.last or "Timeout reading" in lost.last
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()
