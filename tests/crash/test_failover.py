"""A run rides out a Sentinel failover: the primary is SIGKILLed mid-run, the sentinel
promotes a replica, and the run finishes on it without an error reaching the graph.

A real primary, replicas and sentinel on loopback. The run stops in a node (an event),
the primary is killed, the node goes on: the next writes find no server, then a
sentinel naming a dead master, then the new one (``failover.py`` sends them again).
Without ``wait_for_replicas`` the primary is killed once the replica holds every write
(an unreplicated write is lost in any failover: only WAIT refuses those); with
``wait_for_replicas=1`` it is killed at once, and a second replica serves WAIT after.
"""

from __future__ import annotations

import asyncio
import operator
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import redis
from langgraph.graph import END, START, StateGraph
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel
from typing_extensions import TypedDict

from langgraph_durable import AsyncRedisSaver, ConfigurationError, FailoverTimeoutError, RedisSaver
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.servers import Server, start_sentinel, start_server

STEPS = 8
KILL_AT = 3  # the node that waits while the primary is killed
SAFETY = 120.0  # a safety net on every wait: each ends on its event


class Steps(TypedDict):
    trail: Annotated[list[int], operator.add]


@dataclass
class Setup:
    primary: Server
    replicas: list[Server]
    watcher: Server

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.watcher.port}/mymaster"

    def master_port(self) -> int:
        with redis.Redis(port=self.watcher.port) as sentinel:
            return int(sentinel.sentinel_get_master_addr_by_name("mymaster")[1])

    def replicas_caught_up(self) -> bool:
        """Every replica has applied every write the primary made."""
        with redis.Redis(port=self.primary.port) as primary:
            offset = primary.info("replication")["master_repl_offset"]
        for replica in self.replicas:
            with redis.Redis(port=replica.port) as client:
                if client.info("replication").get("slave_repl_offset", -1) < offset:
                    return False
        return True


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + SAFETY
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture(params=[1, 2], ids=["1 replica", "2 replicas"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    (tmp_path / "p").mkdir()
    primary = start_server(str(tmp_path / "p"))
    replicas = []
    for i in range(request.param):
        (tmp_path / f"r{i}").mkdir()
        options = ("--save", "", "--replicaof", "127.0.0.1", str(primary.port))
        replicas.append(start_server(str(tmp_path / f"r{i}"), *options))
    watcher = start_sentinel(
        str(tmp_path), primary, down_after_ms=2000
    )  # short, not so short it flaps on a busy machine
    sentinel = redis.Redis(port=watcher.port)

    def knows_every_replica() -> bool:  # learnt from the master's INFO, every 10 s
        ok = [r for r in sentinel.sentinel_slaves("mymaster")
              if r.get("master-link-status") == "ok" and not r.get("is_disconnected")]  # fmt: skip
        return len(ok) == len(replicas)

    try:
        wait_for(knows_every_replica, "sentinel did not discover the replicas")
        yield Setup(primary, replicas, watcher)
    finally:
        sentinel.close()
        watcher.stop()
        for server in [*replicas, primary]:
            if server.proc.poll() is None:
                server.stop()


def steps_graph(at_kill: Any) -> Any:
    """STEPS nodes in a chain, each adding its number; node KILL_AT calls ``at_kill``."""
    builder = StateGraph(Steps)
    for i in range(STEPS):

        def node(state: Steps, i: int = i) -> dict[str, list[int]]:
            if i == KILL_AT:
                at_kill()
            return {"trail": [i]}

        builder.add_node(f"n{i}", node)
        builder.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    builder.add_edge(f"n{STEPS - 1}", END)
    return builder


class Killer:
    """Kills the primary while the run waits in node KILL_AT, then lets it go on."""

    def __init__(self, setup: Setup, wait_for_replicas: int) -> None:
        self.setup, self.wait_for_replicas = setup, wait_for_replicas
        self.reached, self.killed = threading.Event(), threading.Event()

    def at_kill(self) -> None:  # in the graph's node
        self.reached.set()
        assert self.killed.wait(SAFETY)

    def kill(self) -> None:  # in the test's thread
        assert self.reached.wait(SAFETY)
        if not self.wait_for_replicas:  # no WAIT: only what replicated survives a failover
            wait_for(self.setup.replicas_caught_up, "the replicas did not catch up")
        old = self.setup.master_port()
        self.setup.primary.proc.kill()  # SIGKILL
        self.setup.primary.proc.wait(timeout=SAFETY)
        self.killed.set()
        wait_for(lambda: self.setup.master_port() != old, "the sentinel promoted no replica")


def check(result: dict[str, Any], setup: Setup, thread_id: str, prefix: str) -> None:
    assert result["trail"] == list(range(STEPS))
    with redis.Redis(port=setup.master_port()) as new_master:
        assert new_master.exists(f"{prefix}:{{{thread_id}}}:cp"), "the run ended on the new master"


@pytest.mark.parametrize("client", ["url", "redis-py Sentinel client"])
def test_a_sync_run_rides_out_a_failover(setup: Setup, client: str) -> None:
    wait = len(setup.replicas) - 1  # with 2 replicas, WAIT for 1: one is left after
    killer = Killer(setup, wait)
    graph = steps_graph(killer.at_kill)
    outcome: dict[str, Any] = {}
    source = (
        {"redis_url": setup.url}
        if client == "url"
        else {"redis_client": Sentinel([("127.0.0.1", setup.watcher.port)]).master_for("mymaster")}
    )
    with RedisSaver(**source, key_prefix="lgdfo", wait_for_replicas=wait) as saver:
        compiled = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "sync"}}

        def run() -> None:
            try:
                outcome["result"] = compiled.invoke({"trail": []}, config, durability="sync")
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

        runner = threading.Thread(target=run)
        runner.start()
        killer.kill()
        runner.join(SAFETY)
        assert not runner.is_alive()
        assert "error" not in outcome, repr(outcome.get("error"))
        check(outcome["result"], setup, "sync", "lgdfo")
        assert compiled.get_state(config).values["trail"] == list(range(STEPS))
    if client != "url":
        source["redis_client"].close()


async def test_an_async_run_rides_out_a_failover(setup: Setup) -> None:
    wait = len(setup.replicas) - 1
    killer = Killer(setup, wait)

    async def run(compiled: Any, config: Any) -> Any:
        return await compiled.ainvoke({"trail": []}, config, durability="async")

    graph = steps_graph(killer.at_kill)
    async with AsyncRedisSaver(
        redis_url=setup.url, key_prefix="lgdfo", wait_for_replicas=wait
    ) as saver:
        compiled = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "async"}}
        task = asyncio.ensure_future(run(compiled, config))
        await asyncio.to_thread(killer.kill)
        result = await asyncio.wait_for(task, SAFETY)
        check(result, setup, "async", "lgdfo")
        assert (await compiled.aget_state(config)).values["trail"] == list(range(STEPS))


def test_past_the_budget_the_error_names_the_failover(tmp_path: Path) -> None:
    """Redis gone for longer than ``failover_timeout``: ``FailoverTimeoutError`` (a
    redis-py ConnectionError too), after about that long, not redis-py's own error."""
    server = start_server(str(tmp_path))
    with RedisSaver(redis_url=server.url, key_prefix="lgdfo", failover_timeout=1.5) as saver:
        graph = steps_graph(lambda: None).compile(checkpointer=saver)
        graph.invoke({"trail": []}, {"configurable": {"thread_id": "gone"}})
        server.proc.kill()
        server.proc.wait(timeout=SAFETY)
        started = time.monotonic()
        with pytest.raises(FailoverTimeoutError, match="failover_timeout=1.5") as raised:
            saver.get_tuple({"configurable": {"thread_id": "gone"}})
        assert time.monotonic() - started >= 1.5
        assert isinstance(raised.value, redis.ConnectionError)


def test_during_a_failover_a_write_waits_for_the_replicas_to_come_back(tmp_path: Path) -> None:
    """With ``wait_for_replicas``: right after a lost connection (a failover under way),
    a write its replicas have not acknowledged is sent again with WAIT, not refused, and
    returns once a replica has it. The replica is paused (SIGSTOP) and let go once the
    primary has counted two WAITs of the write (the first and a resend)."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_server(str(tmp_path / "p"))
    replica = start_server(
        str(tmp_path / "r"), "--save", "", "--replicaof", "127.0.0.1", str(primary.port)
    )
    admin = redis.Redis(port=primary.port)
    proxy = FaultProxy("127.0.0.1", primary.port)
    # No retries of redis-py's own: the cut reaches the saver, as a failover's errors do.
    # A blocking pool: the saver keeps no connection between round trips (a kept one that
    # fails once is taken for a socket closed while idle, no failover).
    pool = redis.BlockingConnectionPool(port=proxy.port, retry=Retry(NoBackoff(), 0))
    client = redis.Redis(connection_pool=pool)
    try:
        with redis.Redis(port=replica.port) as on_replica:
            wait_for(
                lambda: on_replica.info("replication").get("master_link_status") == "up",
                "the replica did not sync",
            )
        saver = RedisSaver(client, key_prefix="lgdwait", wait_for_replicas=1)
        graph = steps_graph(lambda: None).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "w"}}
        graph.invoke({"trail": []}, config)  # every write acknowledged by the replica
        saver.get_tuple(config)  # the saver holds a connection, which the cut hits next
        waits_before = _waits(admin)
        replica.proc.send_signal(signal.SIGSTOP)
        proxy.cut("down", after=0)  # the next command runs, its reply is lost
        outcome: dict[str, Any] = {}

        def write() -> None:
            try:
                outcome["config"] = graph.update_state(config, {"trail": [99]})
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

        writer = threading.Thread(target=write)
        writer.start()
        wait_for(lambda: _waits(admin) >= waits_before + 2, "the write was not sent again")
        replica.proc.send_signal(signal.SIGCONT)
        writer.join(SAFETY)
        assert "error" not in outcome, repr(outcome.get("error"))
        assert proxy.faults == 1
        assert graph.get_state(config).values["trail"] == [*range(STEPS), 99]
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        client.close()
        proxy.close()
        admin.close()
        replica.stop()
        primary.stop()


def _waits(admin: redis.Redis) -> int:
    """How many WAIT commands the server has run."""
    return int(admin.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def test_a_single_connection_client_cannot_wait_for_replicas(redis_url: str) -> None:
    """Its batches go out on a pooled connection, WAIT on its own: WAIT would count none
    of the write and say it replicated."""
    client = redis.Redis.from_url(redis_url, single_connection_client=True)
    with pytest.raises(ConfigurationError, match="single_connection_client"):
        RedisSaver(client, wait_for_replicas=1)
    client.close()


def test_a_wrong_url_fails_after_redis_py_retries_not_the_failover_budget(tmp_path: Path) -> None:
    """A saver that never reached its server (a wrong port) raises redis-py's error, as
    before: the failover budget is for a server that went away."""
    port = start_server(str(tmp_path))  # a port nothing listens on once it is stopped
    port.stop()
    saver = RedisSaver(redis_url=port.url, key_prefix="lgdfo", failover_timeout=60)
    with pytest.raises(redis.ConnectionError) as raised:
        saver.get_tuple({"configurable": {"thread_id": "x"}})
    assert not isinstance(raised.value, FailoverTimeoutError)
    saver.client.close()


def test_a_worker_started_during_a_failover_waits_it_out(setup: Setup) -> None:
    """A fresh saver whose first round trip meets a failover (the primary just killed;
    the sentinel takes its down-after time to act) waits for the new master: through
    Sentinel, the sentinels answering is proof the URL is right."""
    config = {"configurable": {"thread_id": "fresh"}}
    with RedisSaver(redis_url=setup.url, key_prefix="lgdfo") as first:
        graph = steps_graph(lambda: None).compile(checkpointer=first)
        graph.invoke({"trail": []}, config)
    wait_for(setup.replicas_caught_up, "the replicas did not catch up")
    setup.primary.proc.kill()
    setup.primary.proc.wait(timeout=SAFETY)
    # without redis-py's own retries, which might outlast a short failover by themselves
    once = {"retry": Retry(NoBackoff(), 0)}
    with RedisSaver(redis_url=setup.url, key_prefix="lgdfo", connection_args=once) as fresh:
        state = steps_graph(lambda: None).compile(checkpointer=fresh).get_state(config)
    assert state.values["trail"] == list(range(STEPS))
