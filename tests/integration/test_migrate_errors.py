"""A migration that stops says whether running it again can help.

A connection lost or a server failing over: run the same command again (what is in Redis
is skipped). A source that cannot be read as it is (langgraph-checkpoint-redis pointed at
a Redis without RedisJSON and RediSearch, a database without its tables): running again
never helps, and the line says what to change instead.
"""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import psycopg
import pytest
import redis

from langgraph_durable.tools.migration import retry_may_help, why_it_stopped
from tests.integration.test_migrate import cli


def test_langgraph_checkpoint_redis_on_plain_redis_says_running_again_will_not_help(
    redis_url: str, key_prefix: str, tmp_path: Path, redis_client: redis.Redis
) -> None:
    pytest.importorskip("langgraph.checkpoint.redis")  # the test extra installs it
    before = redis_client.dbsize()
    (tmp_path / "old_savers.py").write_text(
        textwrap.dedent(f"""
            from langgraph.checkpoint.redis import RedisSaver

            def old_saver():
                return RedisSaver.from_conn_string({redis_url!r})
        """)
    )
    done = cli(
        "--from", "old_savers:old_saver", "--redis-url", redis_url, "--key-prefix", key_prefix,
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "migration stopped" in line and "FT.SEARCH" in line
    assert "running it again will not help" in line and "RedisJSON and RediSearch" in line
    assert "run the same command again" not in line
    assert redis_client.dbsize() == before, "nothing was written"


def test_a_server_that_went_away_is_worth_another_run() -> None:
    try:
        redis.Redis(port=1, socket_connect_timeout=1).ping()
    except redis.ConnectionError as exc:
        refused = exc
    try:
        psycopg.connect("postgresql://nobody@127.0.0.1:1/x", connect_timeout=1)
    except psycopg.OperationalError as exc:
        pg_refused = exc
    for passing in (refused, redis.TimeoutError("timed out"), pg_refused,
                    redis.BusyLoadingError("loading"), ConnectionResetError()):  # fmt: skip
        assert retry_may_help(passing), passing
        assert why_it_stopped(passing).startswith("run the same command again")


def test_a_source_that_cannot_be_read_is_not(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "empty.db")
    try:
        db.execute("SELECT * FROM checkpoints")
    except sqlite3.OperationalError as exc:
        no_table = exc
    locked = sqlite3.OperationalError("database is locked")
    assert retry_may_help(locked)
    for lasting in (no_table, redis.ResponseError("unknown command 'JSON.GET'"), ValueError()):
        assert not retry_may_help(lasting), lasting
        assert "running it again will not help" in why_it_stopped(lasting)
    db.close()
