"""Redis itself failing: a SIGKILLed redis-server with ``appendfsync always`` keeps every
acknowledged checkpoint, ``wait_for_replicas`` stops a run whose writes did not reach
a replica (WAIT asked on the connection that wrote), and a Sentinel failover moves the
savers to the new master without an error."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from langgraph_durable import AsyncRedisSaver, ConfigurationError, NotReplicatedError, RedisSaver
from tests.helpers import graphs
from tests.helpers.kill_harness import ROOT
from tests.helpers.servers import Server, start_sentinel, start_server, wait_until_stopped

AOF_ALWAYS = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")


def test_every_acknowledged_checkpoint_survives_a_sigkill_of_redis(tmp_path: Path) -> None:
    server = start_server(str(tmp_path), *AOF_ALWAYS)
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.workers.ack_writer", server.url, "lgdaof", "t"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acked: list[str] = []
    assert writer.stdout is not None
    try:
        while len(acked) < 300:
            line = writer.stdout.readline()
            assert line, "the writer stopped early"
            acked.append(line.strip())
        server.proc.send_signal(signal.SIGKILL)  # mid-stream: the writer is still writing
        server.proc.wait(timeout=10)
        # Whatever the writer printed was acknowledged before Redis died.
        writer.kill()
        acked += [line.strip() for line in writer.stdout.read().splitlines() if line.strip()]
    finally:
        writer.kill()
        writer.wait(timeout=10)
    restarted = start_server(str(tmp_path), *AOF_ALWAYS)  # the same files, any free port
    try:
        with RedisSaver.from_conn_string(restarted.url, key_prefix="lgdaof") as saver:
            config = {"configurable": {"thread_id": "t"}}
            stored = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list(config)}
            missing = [cid for cid in acked if cid not in stored]
            assert not missing, f"{len(missing)} acknowledged checkpoints lost: {missing[:3]}"
            # Each is whole: its values and its pending write are there and verify.
            last = stored[acked[-1]]
            step = last.checkpoint["channel_values"]["step"]
            assert last.checkpoint["channel_values"]["text"] == "x" * 2000
            assert saver.verify("t").ok
            assert len(acked) >= 300 and step == len(acked) - 1
    finally:
        restarted.stop()


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_server(str(tmp_path / "p"))
    replica = start_server(
        str(tmp_path / "r"), "--save", "", "--replicaof", "127.0.0.1", str(primary.port)
    )
    client = redis.Redis(port=replica.port)
    deadline = time.monotonic() + 120  # a safety net: the wait ends on the sync
    while client.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica did not sync"
        time.sleep(0.05)
    client.close()
    yield primary, replica
    replica.proc.send_signal(signal.SIGCONT)
    replica.stop()
    primary.stop()


def test_wait_for_replicas_returns_once_a_replica_has_the_write(
    replicated: tuple[Server, Server],
) -> None:
    primary, replica = replicated
    with RedisSaver.from_conn_string(primary.url, wait_for_replicas=1) as saver:
        graph = graphs.react_graph(rounds=3).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "r"}}
        graph.invoke(graphs.react_input(), config)
        newest = saver.get_tuple(config)
        assert newest is not None
        # The moment the last write was acknowledged, the replica held all of the thread.
        on_replica, on_primary = redis.Redis(port=replica.port), redis.Redis(port=primary.port)
        tk = saver.keys.thread("r")
        for key in (tk.cp, tk.bl, tk.wr):
            assert on_replica.hgetall(key) == on_primary.hgetall(key) != {}
        assert on_replica.zrange(tk.cps, 0, -1) == on_primary.zrange(tk.cps, 0, -1)
        on_replica.close()
        on_primary.close()


def test_a_write_no_replica_acknowledged_stops_the_run(
    replicated: tuple[Server, Server],
) -> None:
    primary, replica = replicated
    with RedisSaver.from_conn_string(
        primary.url, wait_for_replicas=1, replica_timeout=0.2
    ) as saver:
        config = {"configurable": {"thread_id": "n", "checkpoint_ns": ""}}
        replica.proc.send_signal(signal.SIGSTOP)  # alive but not acknowledging
        wait_until_stopped(replica.proc)
        started = time.monotonic()
        with pytest.raises(NotReplicatedError) as err:
            saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert time.monotonic() - started >= 0.2
        assert err.value.acknowledged == 0 and err.value.wanted == 1
        assert "applied on the primary" in str(err.value)
        assert len(list(saver.list(config))) == 1  # stored on the primary all the same
        replica.proc.send_signal(signal.SIGCONT)


def test_replica_options_are_checked() -> None:
    client = redis.Redis()
    for bad in (
        {"wait_for_replicas": -1},
        {"wait_for_replicas": "1"},
        {"wait_for_replicas": True},
        {"replica_timeout": 0},
    ):
        with pytest.raises(ConfigurationError):
            RedisSaver(client, **bad)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_scripts_lost_by_the_server_are_loaded_again(tmp_path: Path, mode: str) -> None:
    """A restarted Redis (or SCRIPT FLUSH) has none of the saver's scripts: every path,
    the pipelined ones included (put, get_tuple), loads them again and goes on."""
    server = start_server(str(tmp_path))
    try:
        graph = graphs.counter_graph()
        config = {"configurable": {"thread_id": "flushed"}}
        admin = redis.Redis.from_url(server.url)
        if mode == "sync":
            with RedisSaver.from_conn_string(server.url, ttl=600) as saver:
                compiled = graph.compile(checkpointer=saver)
                first = compiled.invoke({"value": 1, "trail": []}, config)
                admin.script_flush()
                second = compiled.invoke({"value": 1, "trail": []}, config)
                admin.script_flush()
                saver.put_writes(saver.get_tuple(config).config, [("late", 1)], "t")
                admin.script_flush()
                assert ("t", "late", 1) in saver.get_tuple(config).pending_writes
                admin.script_flush()  # the first call after it a put (a pipeline with a script)
                root = {"configurable": {"thread_id": "flushed", "checkpoint_ns": ""}}
                meta = {"source": "update", "step": 99, "parents": {}}
                stored = saver.put(root, empty_checkpoint(), meta, {})
                assert saver.get_tuple(stored).metadata["step"] == 99
                assert saver.verify("flushed").ok
        else:

            async def run() -> tuple[Any, Any]:
                async with AsyncRedisSaver.from_conn_string(server.url, ttl=600) as saver:
                    compiled = graph.compile(checkpointer=saver)
                    first = await compiled.ainvoke({"value": 1, "trail": []}, config)
                    admin.script_flush()
                    second = await compiled.ainvoke({"value": 1, "trail": []}, config)
                    admin.script_flush()
                    tup = await saver.aget_tuple(config)
                    await saver.aput_writes(tup.config, [("late", 1)], "t")
                    admin.script_flush()
                    assert ("t", "late", 1) in (await saver.aget_tuple(config)).pending_writes
                    assert (await saver.averify("flushed")).ok
                    return first, second

            first, second = asyncio.run(run())
        assert second["trail"] == first["trail"] * 2  # the second run went on from the first
        admin.close()
    finally:
        server.stop()


def wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    """Until ``condition()`` holds (polled on the servers' own state; the deadline is a
    safety net, not a synchronisation)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_sentinel_failover_moves_the_savers_to_the_new_master(
    replicated: tuple[Server, Server], tmp_path: Path
) -> None:
    """Connections a saver keeps between round trips must not pin it to the old master:
    once SENTINEL FAILOVER is over (the old master a replica of the new one), writes go
    to the new master without an error: a saver from a ``redis+sentinel://`` URL and one
    on a client from redis-py's ``Sentinel.master_for``. (Writes *during* a failover may
    reach the old master and be lost when it resyncs: Redis' asynchronous replication;
    only ``wait_for_replicas`` refuses them. An asyncio client of redis-py's Sentinel
    fails its first command after a failover, redis-py's own SET too: not tested here.)"""
    primary, replica = replicated
    watcher = start_sentinel(str(tmp_path), primary)
    sentinel = redis.Redis(port=watcher.port)
    promoted, demoted = redis.Redis(port=replica.port), redis.Redis(port=primary.port)
    retry = Retry(NoBackoff(), 3)
    sentinels = [("127.0.0.1", watcher.port)]

    def args(thread_id: str) -> tuple[Any, ...]:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        return config, empty_checkpoint(), {"source": "input", "step": -1}, {}

    def on_new_master(thread_id: str) -> bool:
        return bool(promoted.keys(f"lgdfailover*{{{thread_id}}}*"))

    url = f"redis+sentinel://127.0.0.1:{watcher.port}/mymaster"
    master = Sentinel(sentinels).master_for("mymaster", retry=retry)
    try:
        with (
            RedisSaver.from_conn_string(url, key_prefix="lgdfailover") as by_url,
            RedisSaver(master, key_prefix="lgdfailover") as on_client,
        ):
            savers = {"url": by_url, "client": on_client}
            for name, saver in savers.items():
                saver.put(*args(f"{name}-0"))
            wait_for(  # sentinel learns of replicas from the master's INFO, every 10 s
                lambda: any(
                    r.get("port") == replica.port
                    and r.get("master-link-status") == "ok"
                    and not r.get("is_disconnected")
                    for r in sentinel.sentinel_slaves("mymaster")
                ),
                "sentinel did not discover the replica",
            )
            old = sentinel.sentinel_get_master_addr_by_name("mymaster")
            sentinel.execute_command("SENTINEL", "FAILOVER", "mymaster")
            wait_for(
                lambda: (
                    sentinel.sentinel_get_master_addr_by_name("mymaster") != old
                    and promoted.info("replication")["role"] == "master"
                    and demoted.info("replication")["role"] == "slave"
                ),
                "the failover did not complete",
            )
            for i in range(1, 4):
                for name, saver in savers.items():
                    saver.put(*args(f"{name}-{i}"))
        assert on_new_master("url-3") and on_new_master("client-3")
    finally:
        for client in (master, sentinel, promoted, demoted):
            client.close()
        watcher.stop()
