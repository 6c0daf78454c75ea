"""Migration from another checkpointer (``langgraph_durable.migrate`` and
``langgraph-durable migrate``): from a real SQLite file and a real PostgreSQL server, the
threads of real graphs, compared with the source, resumed after a SIGKILL, and finished
on Redis as they would have finished on the source."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_durable import ConfigurationError, RecordDamagedError, RedisSaver, migrate
from langgraph_durable.tools.migration import compare_thread
from langgraph_durable.tools.sources import open_source
from tests.helpers.graphs import counter_graph
from tests.helpers.migration import (
    THREADS,
    checkpoints_in_redis,
    config,
    history,
    layout,
    populate,
    resume_all,
)
from tests.helpers.postgres import own_database
from tests.helpers.redis_keys import flip_last_bit

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "langgraph_durable.cli"]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "migrate", *args],
        check=False,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file holding the threads of ``populate`` (never changed by a test)."""
    path = str(tmp_path_factory.mktemp("migrate") / "source.db")
    with SqliteSaver.from_conn_string(path) as source:
        populate(source)
    return path


@pytest.fixture
def sqlite_copy(sqlite_db: str, tmp_path: Path) -> str:
    """A copy of the source a test may change (resume its threads on it)."""
    path = str(tmp_path / "source.db")
    with sqlite3.connect(sqlite_db) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    return path


@pytest.fixture
def target(saver: RedisSaver) -> RedisSaver:
    """The saver migrated into (conftest's, on the test's own key prefix)."""
    return saver


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A database of its own on the PostgreSQL server of the machine, dropped after."""
    with own_database("lgd_migrate") as url:
        yield url


def assert_same_threads(source: Any, target: RedisSaver) -> None:
    for thread_id in THREADS:
        copied, original = history(target, thread_id), history(source, thread_id)
        assert copied == original, thread_id
        assert target.verify(thread_id).ok


# -- from SQLite, through the Python function ---------------------------------------------
def test_sqlite_threads_are_copied_exactly(sqlite_db: str, target: RedisSaver) -> None:
    seen = []
    with open_source(sqlite_db) as source:
        report = migrate(source, target, progress=seen.append)
        assert report.ok, report.mismatches
        assert [t.thread_id for t in report.threads] == THREADS == [t.thread_id for t in seen]
        total = sum(len(history(source, t)) for t in THREADS)
        assert sum(t.copied for t in report.threads) == total
        assert all(t.verified and t.already_there == 0 for t in report.threads)
        assert sum(t.writes for t in report.threads) > 0
        assert_same_threads(source, target)
        # namespaces and forks came along: the subgraph's, and two children of one checkpoint
        assert {ns for ns, _ in history(target, "sub-open")} - {""}
        parents = [p for p, *_ in history(target, "fork").values()]
        assert any(parents.count(p) == 2 for p in parents if p)
        # the DeltaChannel is rebuilt from the copied writes as on the source
        for thread_id in THREADS:
            want = source.get_tuple(config(thread_id))
            assert target.get_tuple(config(thread_id)).checkpoint == want.checkpoint
        # a second run finds everything there and writes nothing
        again = migrate(source, target)
        assert again.ok and sum(t.copied for t in again.threads) == 0
        assert sum(t.already_there for t in again.threads) == total


def test_migrated_threads_finish_as_they_would_on_the_source(
    sqlite_copy: str, target: RedisSaver
) -> None:
    with open_source(sqlite_copy) as source:
        assert migrate(source, target).ok
    on_redis = resume_all(target)
    with SqliteSaver.from_conn_string(sqlite_copy) as source:
        on_source = resume_all(source)
    assert on_redis == on_source
    assert on_redis["approval-open"]["request"] == "open [ok]"
    assert on_redis["fan-failed"][1] == {1: 1, 2: 2, 3: 1}  # only the failed worker ran again
    assert all(on_redis[f"{t} state"][1] == () for t in ("approval-open", "sub-open"))


# -- from PostgreSQL, through the command line --------------------------------------------
def test_postgres_threads_migrate_by_the_command_line(
    postgres_url: str, redis_url: str, key_prefix: str, target: RedisSaver
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as source:
        source.setup()
        populate(source)
    done = cli(
        "--from", postgres_url, "--redis-url", redis_url, "--key-prefix", key_prefix, "--json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["ok"] is True and [t["thread_id"] for t in summary["threads"]] == THREADS
    assert all(t["verified"] and t["copied"] == t["checkpoints"] > 0 for t in summary["threads"])
    with PostgresSaver.from_conn_string(postgres_url) as source:
        assert_same_threads(source, target)
        on_source = resume_all(source)
    assert resume_all(target) == on_source


# -- interrupted, then run again ----------------------------------------------------------
def test_a_killed_migration_run_again_equals_a_clean_one(
    sqlite_db: str,
    redis_url: str,
    redis_client: redis.Redis,
    key_prefix: str,
    other_key_prefix: str,
    target: RedisSaver,
) -> None:
    landed = 7  # mid-thread: the third thread (delta) has 9 checkpoints
    args = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    env = {**os.environ, "LGD_SOURCE_DB": sqlite_db, "LGD_STOP_AFTER": str(landed)}
    source = "tests.workers.migrate_source:sqlite_source"
    worker = subprocess.Popen(
        [*CLI, "migrate", "--from", source, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120  # a safety net: the wait ends on what Redis holds
    while checkpoints_in_redis(redis_client, key_prefix) < landed:
        assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
        assert time.monotonic() < deadline, "the migration never copied its first checkpoints"
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert checkpoints_in_redis(redis_client, key_prefix) == landed  # it stood still there

    done = cli("--from", f"sqlite:///{sqlite_db}", *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    threads = json.loads(done.stdout)["threads"]
    assert sum(t["already_there"] for t in threads) == landed
    assert sum(t["copied"] for t in threads) == sum(t["checkpoints"] for t in threads) - landed

    with RedisSaver.from_conn_string(redis_url, key_prefix=other_key_prefix) as clean:
        with open_source(sqlite_db) as source:
            assert migrate(source, clean).ok
            assert_same_threads(source, target)
        for thread_id in THREADS:
            assert history(target, thread_id) == history(clean, thread_id)
    assert layout(redis_client, key_prefix) == layout(redis_client, other_key_prefix)


class Killed(BaseException):
    """What ``DiesAtPut`` dies of: nothing in the migration catches it."""


class DiesAtPut(RedisSaver):
    """The real saver, except that its ``puts``-th put dies before anything is sent: a
    process killed after a checkpoint's pending writes went out, before the checkpoint."""

    puts = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        DiesAtPut.puts -= 1
        if DiesAtPut.puts == 0:
            raise Killed
        return super().put(*args, **kwargs)


def test_killed_between_writes_and_checkpoint_runs_again_cleanly(
    sqlite_db: str, redis_url: str, redis_client: redis.Redis, key_prefix: str, target: RedisSaver
) -> None:
    with open_source(sqlite_db) as source:
        original = history(source, "fan-failed")
        newest = source.get_tuple(config("fan-failed"))
        assert len(newest.pending_writes) == 3  # two results and worker 2's error
        writes = sum(len(pending) for *_, pending in original.values())
        DiesAtPut.puts = len(original)  # the newest is put last
        dying = DiesAtPut(redis.Redis.from_url(redis_url), key_prefix=key_prefix)
        with pytest.raises(Killed):
            migrate(source, dying, thread_ids=["fan-failed"])
        assert target.get_tuple(newest.config) is None  # the newest checkpoint is not there
        wix = target.keys.thread("fan-failed").wix
        assert redis_client.zcard(wix) == writes  # but its pending writes are

        report = migrate(source, target, thread_ids=["fan-failed"])
        assert report.ok, report.mismatches
        (thread,) = report.threads
        assert (thread.copied, thread.already_there) == (1, len(original) - 1)
        assert history(target, "fan-failed") == original
        assert redis_client.zcard(wix) == writes


# -- the verify ---------------------------------------------------------------------------
def test_the_verify_finds_what_differs(
    sqlite_copy: str, redis_url: str, redis_client: redis.Redis, key_prefix: str, target: RedisSaver
) -> None:
    args = ["--from", sqlite_copy, "--redis-url", redis_url, "--key-prefix", key_prefix]
    assert cli(*args).returncode == 0
    tk = target.keys.thread("approval-done")
    newest = target.get_tuple(config("approval-done")).config["configurable"]["checkpoint_id"]
    flip_last_bit(redis_client, tk.cp, target.keys.checkpoint_member("", newest))
    done = cli(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"approval-done: checkpoint {newest} is missing from Redis" in done.stdout
    assert "approval-done: verify: checkpoint" in done.stdout
    assert "verified: 5 threads equal to the source, 1 differ" in done.stdout
    only = json.loads(cli(*args, "--thread", "delta", "--json").stdout)
    assert only["ok"] is True and [t["thread_id"] for t in only["threads"]] == ["delta"]

    with SqliteSaver.from_conn_string(sqlite_copy) as source:  # the source goes on
        resume_all(source)
        assert any("missing from Redis" in m for m in compare_thread(source, target, "sub-open"))
        report = migrate(source, target, thread_ids=["approval-open", "sub-open", "fan-failed"])
        assert report.ok, report.mismatches
        assert all(t.copied > 0 for t in report.threads)


def test_a_lost_parent_starts_the_chain_and_a_loop_is_reported(
    sqlite_copy: str, target: RedisSaver
) -> None:
    with open_source(sqlite_copy) as source:
        delta = [cid for _, cid in sorted(history(source, "delta"))]  # oldest first
        approval = [cid for _, cid in sorted(history(source, "approval-done"))]
    with sqlite3.connect(sqlite_copy) as conn:  # damage the source as a bad prune would
        conn.execute("DELETE FROM checkpoints WHERE checkpoint_id = ?", (delta[3],))
        conn.execute(  # the oldest checkpoint's parent is now its own grandchild
            "UPDATE checkpoints SET parent_checkpoint_id = ? WHERE checkpoint_id = ?",
            (approval[2], approval[0]),
        )
    with open_source(sqlite_copy) as source:
        report = migrate(source, target, thread_ids=["delta", "approval-done"])
        lost, loop = report.threads
        assert lost.ok and lost.copied == len(delta) - 1
        assert history(target, "delta")[("", delta[4])][0] is None  # a root now
        assert history(target, "delta")[("", delta[5])][0] == delta[4]
        assert loop.copied == 0
        assert loop.mismatches[: len(approval)] == sorted(
            f"checkpoint {cid} is on or under a loop of parents: not copied" for cid in approval
        )


class NumberedVersions(SqliteSaver):
    """SQLite with ``BaseCheckpointSaver``'s own versions: plain numbers, no random tail."""

    def get_next_version(self, current: Any, channel: None) -> Any:
        return BaseCheckpointSaver.get_next_version(self, current, channel)


def test_a_version_reused_by_a_fork_is_reported(tmp_path: Path, target: RedisSaver) -> None:
    with sqlite3.connect(tmp_path / "numbered.db", check_same_thread=False) as conn:
        source = NumberedVersions(conn)
        counter = counter_graph().compile(checkpointer=source)
        counter.invoke({"value": 1, "trail": []}, config("fork"))
        before_a = list(counter.get_state_history(config("fork")))[-2].config
        counter.invoke(None, counter.update_state(before_a, {"value": 100}))
        # both branches number their values 3, 4, 5; Redis keeps one value per version
        report = migrate(source, target)
    assert not report.ok
    assert report.mismatches and all("differs in: checkpoint" in m for m in report.mismatches)


# -- bad sources and targets --------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("ftp://somewhere", "unknown source 'ftp://somewhere'"),
        ("/no/such/file.db", "no SQLite file at '/no/such/file.db'"),
        ("sqlite:///no-such.db", "no SQLite file at 'no-such.db'"),
        ("json:no_such_factory", "cannot load source factory json:no_such_factory"),
        ("os:getcwd", "source os:getcwd gave a str, not a BaseCheckpointSaver"),
        ("postgresql://me:s3cret@127.0.0.1:1/x", "cannot open source postgresql://me:***@"),
    ],
)
def test_a_bad_source_is_one_line(redis_url: str, key_prefix: str, source: str, says: str) -> None:
    done = cli("--from", source, "--redis-url", redis_url, "--key-prefix", key_prefix)
    assert done.returncode == 2
    assert done.stderr.startswith("langgraph-durable: bad configuration: ")
    assert says in done.stderr and "s3cret" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_target_with_keep_last_is_refused(
    sqlite_db: str, redis_url: str, key_prefix: str
) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, keep_last=3) as target,
        open_source(sqlite_db) as source,
        pytest.raises(ConfigurationError, match="keep_last"),
    ):
        migrate(source, target)


# -- a source is data, never code ---------------------------------------------------------
class _Forging:
    """A serializer that stores the value "FORGE" as a msgpack object naming
    ``os.system``: what someone who can write to the source database could store."""

    def __init__(self, real: Any, marker: Path) -> None:
        import ormsgpack
        from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG

        self.real = real
        call = ormsgpack.packb(("os", "system", f"touch {marker}"))
        self.forged = "msgpack", ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, call))

    def dumps_typed(self, obj: Any) -> Any:
        return self.forged if obj == "FORGE" else self.real.dumps_typed(obj)

    def loads_typed(self, data: Any) -> Any:
        return self.real.loads_typed(data)


def _forge(saver: BaseCheckpointSaver, marker: Path) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver.serde = _Forging(saver.serde, marker)  # type: ignore[assignment]
    cfg = {"configurable": {"thread_id": "evil", "checkpoint_ns": ""}}
    saved = saver.put(cfg, empty_checkpoint(), {"source": "input", "step": -1}, {})
    saver.put_writes(saved, [("messages", "FORGE")], "task-1")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_source_row_naming_code_is_refused_not_run(
    kind: str, tmp_path: Path, redis_url: str, key_prefix: str, request: pytest.FixtureRequest
) -> None:
    marker = tmp_path / "ran"
    source = (
        str(tmp_path / "forged.db") if kind == "sqlite" else request.getfixturevalue("postgres_url")
    )
    with _opened(kind, source) as written:
        written.setup()
        _forge(written, marker)
    with (
        open_source(source) as src,
        pytest.raises(RecordDamagedError, match="refused type os.system"),
    ):
        src.get_tuple({"configurable": {"thread_id": "evil", "checkpoint_ns": ""}})
    assert not marker.exists()
    done = cli("--from", source, "--redis-url", redis_url, "--key-prefix", key_prefix)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "migration stopped" in line and "os.system" in line and "--allow-type" in line
    assert "Traceback" not in done.stderr
    assert not marker.exists(), "the migration ran code a source row named"
    # the row works: LangGraph's permissive reader runs it (what the migration used)
    with _opened(kind, source) as plain:
        plain.serde = JsonPlusSerializer(allowed_msgpack_modules=True)
        plain.get_tuple({"configurable": {"thread_id": "evil", "checkpoint_ns": ""}})
    assert marker.exists()


def _opened(kind: str, source: str) -> Any:
    if kind == "sqlite":
        return SqliteSaver.from_conn_string(source)
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver.from_conn_string(source)
