"""The `langgraph-durable` console script: the demo to its verdict, then every command on
the thread it left behind (as a user would run them, in subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "langgraph_durable.cli"]


def run(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*CLI, *args], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def demo(redis_url: str) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    prefix = f"lgdcli{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "REDIS_URL": redis_url}
    # demo.start_and_kill kills its worker a fixed time (delay / 5) after the charge,
    # expecting the charge recorded and the e-mail not yet sent: a longer delay widens
    # both windows on a loaded machine (a stopgap: the demo should wait on events)
    done = run(["demo", "--damage", "--delay", "1", "--json", "--key-prefix", prefix], env)
    verdict = json.loads(done.stdout)
    yield {**env, "LGD_PREFIX": prefix}, verdict
    import redis

    from tests.conftest import delete_prefix

    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()


def test_demo_repeats_no_side_effect_and_shows_the_fallback(demo: Any) -> None:
    _, verdict = demo
    assert verdict["exactly_once"] is True
    assert verdict["side_effects"] == verdict["planned"] == 4 and verdict["duplicates"] == []
    assert verdict["replayed"] == ["charge_card"]  # recorded before the kill
    assert verdict["escalations"] == [{"call": "send_email", "answer": "retry"}]
    assert [s["reason"] for s in verdict["skipped_checkpoints"]] == ["checksum mismatch"]
    assert verdict["skipped_checkpoints"][0]["checkpoint_id"] == verdict["damaged_checkpoint"]


def test_every_command_works_on_the_demo_thread(demo: Any) -> None:
    env, verdict = demo
    prefix = ["--key-prefix", env["LGD_PREFIX"]]
    thread = verdict["thread_id"]
    threads = json.loads(run(["threads", "--json", *prefix], env).stdout)
    assert [t["thread_id"] for t in threads] == [thread]
    assert threads[0]["ledger_entries"] == 4

    history = json.loads(run(["history", thread, "--json", *prefix], env).stdout)
    assert [h["step"] for h in history] == sorted((h["step"] for h in history), reverse=True)
    assert history[0]["step"] == threads[0]["step"]

    shown = json.loads(run(["show", thread, "--json", *prefix], env).stdout)
    assert shown["values"]["messages"][-1] == "ai: Report written, team and boss informed."
    older = history[-2]["checkpoint_id"]
    assert json.loads(run(["show", thread, older, "--json", *prefix], env).stdout)["step"] == 0

    entries = json.loads(run(["ledger", thread, "--json", *prefix], env).stdout)
    assert [(e["tool"], e["state"]) for e in entries] == [
        ("charge_card", "result"),
        ("send_email", "result"),
        ("write_report", "result"),
        ("send_email", "result"),
    ]
    assert entries[1]["resolution"] == "retry" and entries[1]["attempts"] == 2

    text = run(["ledger", thread, *prefix], env).stdout
    assert "IDEMPOTENCY KEY" in text and "charge_card" in text

    verified = json.loads(run(["verify", "--all", "--json", *prefix], env).stdout)
    assert verified[0]["ok"] and verified[0]["quarantined"] == 1  # the demo's damage


def test_verify_exits_non_zero_on_damage(redis_url: str, demo: Any) -> None:
    import redis

    env, verdict = demo
    prefix = env["LGD_PREFIX"]
    client = redis.Redis.from_url(redis_url)
    tk_cp = f"{prefix}:{{{verdict['thread_id']}}}:cp"
    field = min(client.hkeys(tk_cp))
    record = client.hget(tk_cp, field)
    client.hset(tk_cp, field, record[:-1] + bytes([record[-1] ^ 1]))
    try:
        done = run(["verify", verdict["thread_id"], "--key-prefix", prefix], env, check=False)
        assert done.returncode == 1
        assert "DAMAGED" in done.stdout and "checksum mismatch" in done.stdout
    finally:
        client.hset(tk_cp, field, record)
        client.close()


def test_server_start_status_stop(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    data = ["--data-dir", str(tmp_path)]
    assert run(["server", "status", *data], env, check=False).returncode == 3
    url = run(["server", "start", *data], env).stdout.strip()
    try:
        assert url.startswith("redis://127.0.0.1:")
        status = json.loads(run(["server", "status", "--json", *data], env).stdout)
        assert status == {"running": True, "url": url, "data_dir": str(tmp_path)}
        assert run(["server", "start", *data], env).stdout.strip() == url  # reused
    finally:
        assert run(["server", "stop", *data], env).stdout.strip() == "stopped"
    assert "not running" in run(["server", "status", *data], env, check=False).stdout
