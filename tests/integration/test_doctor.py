"""``langgraph-durable doctor`` against real servers configured as users' are: healthy
with AOF and noeviction (a single server cannot ride a failover: a warning), and a
problem each for an evicting policy, no persistence, a user without EVALSHA, and the
SCRIPT command renamed away. It never leaves a key behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis

from langgraph_durable.doctor import check
from tests.helpers.servers import start_server

ROOT = Path(__file__).resolve().parents[2]


def doctor(url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", "doctor", "--redis-url", url, "--json"],
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
