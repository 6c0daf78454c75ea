"""The side-by-side benchmark: langgraph-durable against LangGraph's own savers and the
other Redis checkpointers, every figure measured in ONE run on ONE machine, so ratios
compare like with like.

    python benchmarks/bench.py                 # full run (several minutes on 2 cores)
    python benchmarks/bench.py --quick         # smoke run, under ~2 minutes
    python benchmarks/bench.py --savers durable,valkey --out /tmp/bench

Competitor savers are optional; any that is missing or unreachable is skipped, saying
why. Install them in a venv of their own so the project's is not disturbed:

    python3 -m venv /work/benchvenv
    /work/benchvenv/bin/pip install -e '.[test,hiredis]' langgraph-checkpoint-sqlite \
        langgraph-checkpoint-postgres 'psycopg[binary,pool]' 'langgraph-checkpoint-aws[valkey]' \
        langgraph-checkpoint-plainredis langgraph-checkpoint-redis
    /work/benchvenv/bin/python benchmarks/bench.py --quick

Workloads (medians; ratios against InMemorySaver from the same run, async rows against
InMemorySaver driven through the async API):
  a  ReAct graph, 40 rounds (81 supersteps), durability="sync": time and checkpointer
     overhead per superstep (against the same graph without a checkpointer)
  b  micro: put (one channel changed), put_writes, get_tuple(latest), list(limit=10) on
     a thread whose newest checkpoint holds 100 messages (~150 KB)
  c  the micro figures on threads of 10, 1,000 and 10,000 checkpoints
  d  the floor: serialize what a put writes and write it in one pipelined round trip
  e  100 concurrent graph runs on an async saver against the same runs sequentially
  f  bytes stored per checkpoint against the serialized size of the new data
  g  recovery: a fresh process from launch to its first resumed step; the read path
     alone, with and without a damaged newest checkpoint

Isolation on a shared Redis: every key this script creates contains a per-run tag
(``lgdb-<hex>``), in the key prefix or in the thread id; at the end it deletes exactly
the keys containing that tag. It never flushes a database. Postgres tables go into a
schema created (and dropped) by this run; SQLite lives in a temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import inspect
import json
import logging
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, TypeVar

from typing_extensions import Self

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis
import redis.asyncio
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from benchmarks.integrity_cost import NoHashEnvelope
from benchmarks.integrity_cost import measure as measure_integrity
from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.demo import damage_newest_checkpoint
from langgraph_durable.keys import THREAD_KEY_KINDS, escape_thread_id
from tests.helpers import graphs

T = TypeVar("T")
K = TypeVar("K")
PAYLOAD = 1500  # characters per AI message, as the "1-2 KB per step"
MICRO_MESSAGES = 100  # messages in the newest checkpoint of the micro thread (~150 KB)
LENGTH_MESSAGES = 10  # smaller state for (c): savers that copy the whole state per
#                       checkpoint would otherwise need GBs of Redis at 10,000 checkpoints
RECOVERY_CHILD = Path(__file__).resolve().parent / "recovery_child.py"
LATENCY_PROXY = Path(__file__).resolve().parent / "latency_proxy.py"

# key -> (label, family, mode). Families group the sync and async flavour of one package.
SAVERS: dict[str, tuple[str, str, str]] = {
    "memory": ("InMemorySaver", "memory", "sync"),
    "memory-async": ("InMemorySaver (async API)", "memory", "async"),
    "sqlite": ("SqliteSaver", "sqlite", "sync"),
    "sqlite-async": ("AsyncSqliteSaver", "sqlite", "async"),
    "postgres": ("PostgresSaver", "postgres", "sync"),
    "postgres-async": ("AsyncPostgresSaver", "postgres", "async"),
    "durable": ("RedisSaver (langgraph-durable)", "durable", "sync"),
    "durable-async": ("AsyncRedisSaver (langgraph-durable)", "durable", "async"),
    "valkey": ("ValkeySaver (checkpoint-aws)", "valkey", "sync"),
    "valkey-async": ("AsyncValkeySaver (checkpoint-aws)", "valkey", "async"),
    "plainredis": ("RedisSaver (checkpoint-plainredis)", "plainredis", "sync"),
    "plainredis-async": ("AsyncRedisSaver (checkpoint-plainredis)", "plainredis", "async"),
    "redis-official": ("RedisSaver (checkpoint-redis)", "redis-official", "sync"),
}
REDIS_FAMILIES = ("durable", "valkey", "plainredis", "redis-official")
MICRO_FIGURES = ("put", "put_writes", "get_tuple", "list10")


class Skip(Exception):
    """A saver that cannot run here; the message says why."""


# -- timing -----------------------------------------------------------------------------
Step = tuple[str, Callable[[dict[str, Any]], Any]]


def run_steps(
    bench: Bench, h: Handle, steps: Sequence[Step], ctx: dict[str, Any]
) -> dict[str, float]:
    """Run ``steps`` in order and time each one (seconds); each step's result is stored in
    ``ctx`` under its name for the next. Async savers run all steps in one turn of the
    event loop, so loop start-up is not charged to any step."""
    durations: dict[str, float] = {}
    if h.mode == "sync":
        for name, fn in steps:
            t0 = time.perf_counter()
            ctx[name] = fn(ctx)
            durations[name] = time.perf_counter() - t0
        return durations

    async def drive() -> dict[str, float]:
        for name, fn in steps:
            t0 = time.perf_counter()
            ctx[name] = await fn(ctx)
            durations[name] = time.perf_counter() - t0
        return durations

    return bench.run(drive())


def median_us(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e6


async def _collect(aiter: Any) -> list[Any]:
    return [item async for item in aiter]


# -- savers -----------------------------------------------------------------------------
@dataclass
class Handle:
    """One saver under test, with what the workloads need to drive and inspect it."""

    key: str
    label: str
    family: str
    mode: str  # "sync" | "async": which API the workloads call
    saver: Any  # a BaseCheckpointSaver; None for the no-checkpointer baseline of (a)
    # SCAN patterns matching every Redis key of one thread (storage workload), if Redis
    thread_patterns: Callable[[str], list[str]] | None = None

    # The checkpointer calls; for async savers each returns a coroutine (run it with
    # Bench.do, or await it inside run_steps).
    def put(self, config: Any, cp: Any, md: Any, nv: Any) -> Any:
        s = self.saver
        return s.put(config, cp, md, nv) if self.mode == "sync" else s.aput(config, cp, md, nv)

    def put_writes(self, config: Any, writes: Any, task_id: str) -> Any:
        s = self.saver
        if self.mode == "sync":
            return s.put_writes(config, writes, task_id)
        return s.aput_writes(config, writes, task_id)

    def get_tuple(self, config: Any) -> Any:
        s = self.saver
        return s.get_tuple(config) if self.mode == "sync" else s.aget_tuple(config)

    def list(self, config: Any, limit: int | None = None) -> Any:
        s = self.saver
        if self.mode == "sync":
            return list(s.list(config, limit=limit))
        return _collect(s.alist(config, limit=limit))

    def delete_thread(self, thread_id: str) -> Any:
        s = self.saver
        return s.delete_thread(thread_id) if self.mode == "sync" else s.adelete_thread(thread_id)

    def invoke(self, graph: Any, inp: Any, config: Any) -> Any:
        # Without a checkpointer LangGraph rejects `durability` (it warns, then fails).
        kw = {"durability": "sync"} if self.saver is not None else {}
        if self.mode == "sync":
            return graph.invoke(inp, config, **kw)
        return graph.ainvoke(inp, config, **kw)


class Bench:
    """The run: options, the open savers, one event loop for every async saver, and the
    bookkeeping that lets cleanup delete exactly what this run created."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.tag = f"lgdb-{uuid.uuid4().hex[:8]}"  # in every Redis key this run creates
        self.redis_url: str = args.redis_url or pick_redis_url()
        self.pg_url: str = args.pg_url
        self.redis = redis.Redis.from_url(self.redis_url)  # inspection and cleanup only
        self.loop = asyncio.new_event_loop()
        self.stack = ExitStack()
        self.astack = AsyncExitStack()
        self.tmp = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="lgdb-")))
        self.pg_schema: str | None = None
        self.handles: dict[str, Handle] = {}
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []  # facts about the set-up, printed under the machine

    # event loop --------------------------------------------------------------------
    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def do(self, value: Any) -> Any:
        """The result of a Handle call: run it if it is a coroutine (async saver)."""
        return self.run(value) if inspect.isawaitable(value) else value

    def enter_async(self, cm: AbstractAsyncContextManager[T]) -> T:
        return self.run(self.astack.enter_async_context(cm))

    def thread(self, h: Handle | str, purpose: str) -> str:
        key = h.key if isinstance(h, Handle) else h
        return f"{self.tag}-{key}-{purpose}-{uuid.uuid4().hex[:6]}"

    def prefix(self, key: str) -> str:
        return f"{self.tag}-{key}"

    # opening -----------------------------------------------------------------------
    def open(self, keys: Sequence[str]) -> None:
        for key in keys:
            label, family, mode = SAVERS[key]
            try:
                saver, patterns = OPENERS[family](self, key, mode)
            except Skip as skip:
                self.skipped[key] = str(skip)
                print(f"  skip {label}: {skip}", flush=True)
                continue
            # an installed saver that fails to start: skip it, saying why
            except Exception as exc:  # noqa: BLE001
                self.skipped[key] = f"failed to start: {type(exc).__name__}: {exc}"[:300]
                print(f"  skip {label}: {self.skipped[key]}", flush=True)
                continue
            self.handles[key] = Handle(key, label, family, mode, saver, patterns)
            print(f"  ready {label}", flush=True)

    def postgres_conninfo(self) -> str:
        """Connection string whose search_path is a schema this run created (once)."""
        if self.pg_schema is None:
            try:
                import psycopg
            except ImportError as exc:
                raise Skip("psycopg is not installed") from exc
            schema = self.tag.replace("-", "_")
            try:
                with psycopg.connect(self.pg_url, autocommit=True, connect_timeout=3) as conn:
                    conn.execute(f'CREATE SCHEMA "{schema}"')
            except psycopg.Error as exc:
                raise Skip(f"PostgreSQL not reachable at {self.pg_url}: {exc}") from exc
            self.pg_schema = schema

            def drop() -> None:
                with psycopg.connect(self.pg_url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

            # Registered before any saver connection, so it runs after they are closed.
            self.stack.callback(drop)
            self.notes.append(
                f"Postgres savers: tables in schema {schema} of {self.pg_url}, dropped at the end"
            )
        sep = "&" if "?" in self.pg_url else "?"
        return f"{self.pg_url}{sep}options=-csearch_path%3D{self.pg_schema}"

    # cleanup -----------------------------------------------------------------------
    def close(self) -> dict[str, int]:
        try:
            self.run(self.astack.aclose())
        finally:
            self.stack.close()
            removed = delete_matching(self.redis, f"*{self.tag}*")
            left = sum(1 for _ in self.redis.scan_iter(match=f"*{self.tag}*", count=1000))
            self.redis.close()
            self.loop.close()
        return {"redis_keys_removed": removed, "redis_keys_left": left}


def pick_redis_url() -> str:
    """REDIS_URL, else the local server on 6379, else an embedded one."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    try:
        redis.Redis(socket_connect_timeout=1).ping()
        return "redis://127.0.0.1:6379/0"
    except redis.RedisError:
        from langgraph_durable.embedded import resolve_url

        return resolve_url(None)


def delete_matching(client: redis.Redis, pattern: str) -> int:
    removed, batch = 0, []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            removed += client.unlink(*batch)
            batch = []
    if batch:
        removed += client.unlink(*batch)
    return removed


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


Opened = tuple[BaseCheckpointSaver, Callable[[str], list[str]] | None]


def open_memory(b: Bench, key: str, mode: str) -> Opened:
    return InMemorySaver(), None


def open_sqlite(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-sqlite (and aiosqlite) not installed") from exc
    path = str(b.tmp / f"{key}.sqlite")  # setup() switches the file to WAL mode
    if mode == "sync":
        conn = sqlite3.connect(path, check_same_thread=False)
        b.stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.setup()
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync_level = conn.execute("PRAGMA synchronous").fetchone()[0]
        b.notes.append(
            f"SqliteSaver: a file in a temp dir, journal_mode={journal}, "
            f"synchronous={sync_level} (the saver's defaults)"
        )
        return saver, None
    asaver = b.enter_async(AsyncSqliteSaver.from_conn_string(path))
    b.run(asaver.setup())
    return asaver, None


def open_postgres(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-postgres (psycopg) not installed") from exc
    conninfo = b.postgres_conninfo()
    if mode == "sync":
        saver = b.stack.enter_context(PostgresSaver.from_conn_string(conninfo))
        saver.setup()
        return saver, None
    asaver = b.enter_async(AsyncPostgresSaver.from_conn_string(conninfo))
    b.run(asaver.setup())
    return asaver, None


def open_durable(b: Bench, key: str, mode: str) -> Opened:
    prefix = b.prefix(key)

    def patterns(thread_id: str) -> list[str]:
        return [f"{_glob(prefix)}:{{{_glob(escape_thread_id(thread_id))}}}:*"]

    if mode == "sync":
        return b.stack.enter_context(
            RedisSaver.from_conn_string(b.redis_url, key_prefix=prefix)
        ), patterns
    saver = b.enter_async(AsyncRedisSaver.from_conn_string(b.redis_url, key_prefix=prefix))
    return saver, patterns


def open_valkey(b: Bench, key: str, mode: str) -> Opened:
    # ValkeySaver has no key prefix: its keys are checkpoint:{T}:..., writes:{T}:...,
    # thread:{T}:...; the run tag in every thread id keeps them apart and findable.
    try:
        import valkey  # noqa: F401  (the [valkey] extra)
        from langgraph_checkpoint_aws.checkpoint.valkey import AsyncValkeySaver, ValkeySaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-aws[valkey] not installed") from exc

    def patterns(thread_id: str) -> list[str]:
        t = _glob(thread_id)
        return [f"checkpoint:{{{t}}}:*", f"writes:{{{t}}}:*", f"thread:{{{t}}}:*"]

    if mode == "sync":
        return b.stack.enter_context(ValkeySaver.from_conn_string(b.redis_url)), patterns
    # from_conn_string's pool raises "Too many connections" past its size (10 by default;
    # 100 concurrent runs in (e) overflowed even 128): give it a pool that waits instead,
    # as ours has.
    from valkey.asyncio import BlockingConnectionPool

    pool = BlockingConnectionPool.from_url(b.redis_url, max_connections=100, timeout=20)
    b.astack.push_async_callback(pool.disconnect)  # the saver's client leaves it open
    saver = b.enter_async(AsyncValkeySaver.from_pool(pool))
    return saver, patterns


def open_plainredis(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph_checkpoint_plainredis import AsyncRedisSaver as PlainAsync
        from langgraph_checkpoint_plainredis import RedisSaver as PlainSync
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-plainredis not installed") from exc
    prefix = b.prefix(key)

    def patterns(thread_id: str) -> list[str]:
        return [f"{_glob(prefix)}:*:{_glob(thread_id)}:*"]

    if mode == "sync":
        saver = PlainSync(url=b.redis_url, prefix=prefix)
        b.stack.callback(saver.close)
        return saver, patterns

    async def make() -> Any:  # its asyncio client must be created on the bench loop
        # Its own client's pool raises MaxConnectionsError under the 100 concurrent runs
        # of (e): give it a pool that waits, as ours has (same settings as its default
        # client otherwise: RESP2, binary replies).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            b.redis_url, max_connections=100, timeout=20, protocol=2
        )
        return PlainAsync(client=redis.asyncio.Redis.from_pool(pool), prefix=prefix)

    asaver = b.run(make())
    b.astack.push_async_callback(asaver.aclose)
    return asaver, patterns


def open_redis_official(b: Bench, key: str, mode: str) -> Opened:
    try:
        from langgraph.checkpoint.redis import RedisSaver as OfficialSaver
    except ImportError as exc:
        raise Skip("langgraph-checkpoint-redis not installed") from exc
    modules = {
        (m.get(b"name") or m.get("name") or b"").lower()
        for m in (
            dict(zip(entry[::2], entry[1::2])) if isinstance(entry, list) else entry
            for entry in b.redis.execute_command("MODULE", "LIST")
        )
    }
    names = {n.decode() if isinstance(n, bytes) else n for n in modules}
    if not {"search", "rejson"} <= names:
        raise Skip(
            "needs the RedisJSON and RediSearch modules; this Redis "
            f"({server_version(b.redis)}) has {sorted(names) or 'no modules'}"
        )
    prefix = b.prefix(key)
    saver = b.stack.enter_context(
        OfficialSaver.from_conn_string(
            b.redis_url, checkpoint_prefix=f"{prefix}-cp", checkpoint_write_prefix=f"{prefix}-cw"
        )
    )
    saver.setup()  # note: its search indexes are not keys; cleanup leaves them
    return saver, lambda thread_id: [f"*{_glob(thread_id)}*"]


OPENERS: dict[str, Callable[[Bench, str, str], Opened]] = {
    "memory": open_memory,
    "sqlite": open_sqlite,
    "postgres": open_postgres,
    "durable": open_durable,
    "valkey": open_valkey,
    "plainredis": open_plainredis,
    "redis-official": open_redis_official,
}


# -- synthetic threads (b, c, d, f) -----------------------------------------------------
def make_messages(n: int) -> list[BaseMessage]:
    return [
        (HumanMessage if i % 2 else AIMessage)(content="x" * PAYLOAD, id=str(i)) for i in range(n)
    ]


@dataclass
class ThreadState:
    """A thread driven by hand: a big ``messages`` channel written at the start, then one
    small ``counter`` channel changed per checkpoint (what most supersteps look like)."""

    thread_id: str
    messages: list[BaseMessage]
    config: Any = None  # the RunnableConfig of the newest put
    messages_version: Any = None
    counter_version: Any = None
    counter: int = 0

    def __post_init__(self) -> None:
        self.config = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

    @property
    def latest(self) -> Any:  # a RunnableConfig
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

    def next_checkpoint(self, saver: BaseCheckpointSaver, *, messages_too: bool = False) -> tuple:
        """(checkpoint, metadata, new_versions) of the next put. Versions advance from
        the current one, as LangGraph does (some savers' versions are plain counters)."""
        self.counter_version = saver.get_next_version(self.counter_version, None)
        new_versions = {"counter": self.counter_version}
        if messages_too or self.messages_version is None:
            self.messages_version = saver.get_next_version(self.messages_version, None)
            new_versions["messages"] = self.messages_version
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": self.messages, "counter": self.counter}
        cp["channel_versions"] = {
            "messages": self.messages_version,
            "counter": self.counter_version,
        }
        metadata = {"source": "loop", "step": self.counter, "parents": {}}
        self.counter += 1
        return cp, metadata, new_versions


def fill_thread(
    b: Bench, h: Handle, st: ThreadState, count: int, budget: float, messages_each: bool = False
) -> float | None:
    """Put ``count`` checkpoints on the thread; returns seconds per put, or None (thread
    deleted) if the first puts show that filling would take longer than ``budget``."""
    t0 = time.perf_counter()
    probe = min(200, max(1, count // 10))  # puts timed before deciding
    for i in range(count):
        cp, md, nv = st.next_checkpoint(h.saver, messages_too=messages_each)
        st.config = b.do(h.put(st.config, cp, md, nv))
        if i + 1 == probe < count and (time.perf_counter() - t0) / probe * count > budget:
            b.do(h.delete_thread(st.thread_id))
            return None
    return (time.perf_counter() - t0) / count


def micro_steps(h: Handle, st: ThreadState, i: int) -> list[Step]:
    """One round of (b): put one changed channel, put_writes, get_tuple latest, list 10."""
    cp, md, nv = st.next_checkpoint(h.saver)
    writes = [("messages", st.messages[-1]), ("counter", i)]
    return [
        ("put", lambda c: h.put(st.config, cp, md, nv)),
        ("put_writes", lambda c: h.put_writes(c["put"], writes, f"task-{i}")),
        ("get_tuple", lambda c: h.get_tuple(st.latest)),
        ("list10", lambda c: h.list(st.latest, limit=10)),
    ]


def micro_rounds(
    b: Bench, threads: dict[K, tuple[Handle, ThreadState]], rounds: int
) -> dict[K, dict[str, float]]:
    """Median µs per figure per thread; the threads take turns every round, in a rotating
    order, so drift on a shared machine hits all of them alike."""
    samples: dict[K, dict[str, list[float]]] = {k: {f: [] for f in MICRO_FIGURES} for k in threads}
    order = list(threads)
    for i in range(rounds):
        for key in order[i % len(order) :] + order[: i % len(order)]:
            h, st = threads[key]
            ctx: dict[str, Any] = {}
            durations = run_steps(b, h, micro_steps(h, st, i), ctx)
            st.config = ctx["put"]
            for name, d in durations.items():
                samples[key][name].append(d)
    return {k: {f: median_us(v) for f, v in figs.items()} for k, figs in samples.items()}


def floor_key(h: Handle) -> str:
    return "memory-async" if h.mode == "async" else "memory"


# -- (a) graph ----------------------------------------------------------------------------
class RedisFloorSaver(InMemorySaver):
    """Not a checkpointer anyone should use: InMemorySaver plus the least any Redis
    checkpointer must do on the same calls, i.e. write the serialized new data of each
    put and put_writes with one pipelined round trip (no index, no integrity, no
    fencing). Its overhead in (a) is what a Redis saver costs on this machine before
    doing anything a checkpointer needs; ours is measured against it too."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        super().__init__()
        self.client, self.prefix = client, prefix

    def _key(self, config: RunnableConfig, kind: str) -> str:
        return f"{self.prefix}:{{{config['configurable']['thread_id']}}}:{kind}"

    # The bytes written are the ones InMemorySaver just serialized (no second dumps).
    def put(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = super().put(config, checkpoint, metadata, new_versions)
        thread_id, ns = out["configurable"]["thread_id"], out["configurable"]["checkpoint_ns"]
        stored, meta, _ = self.storage[thread_id][ns][checkpoint["id"]]
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self._key(config, "cp"), checkpoint["id"], stored[1] + meta[1])
        for channel, version in new_versions.items():
            value = self.blobs[(thread_id, ns, channel, version)][1]
            pipe.hset(self._key(config, "bl"), f"{channel}:{version}", value)
        pipe.zadd(self._key(config, "cps"), {checkpoint["id"]: 0})
        pipe.execute()
        return out

    def put_writes(
        self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        super().put_writes(config, writes, task_id, task_path)
        conf = config["configurable"]
        stored = self.writes[
            (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        ]
        pipe = self.client.pipeline(transaction=False)
        for (task, idx), (_, _, value, _) in stored.items():
            if task == task_id:
                pipe.hset(
                    self._key(config, "wr"), f"{conf['checkpoint_id']}:{task}:{idx}", value[1]
                )
        pipe.execute()


REDIS_FLOOR_LABEL = "Redis floor (reference, not a saver)"


def invoke_react(h: Handle, graph: Any, config: RunnableConfig, ctx: dict[str, Any]) -> Any:
    return h.invoke(graph, graphs.react_input(), config)


def workload_graph(b: Bench, rounds: int, repeats: int) -> dict[str, Any]:
    """µs per superstep of the ReAct graph, with each saver and with none (the baseline
    for the checkpointer's overhead); every repeat runs all of them in turn."""
    supersteps = 2 * rounds + 1
    builder = graphs.react_graph(rounds=rounds, payload=PAYLOAD)
    runners: dict[str, tuple[Handle, Any]] = {}
    for mode in ("sync", "async"):
        if any(h.mode == mode for h in b.handles.values()):
            none = Handle(f"none-{mode}", f"no checkpointer ({mode})", "none", mode, None)
            runners[none.key] = (none, builder.compile())
    for key, h in b.handles.items():
        runners[key] = (h, builder.compile(checkpointer=h.saver))
    if "durable" in b.handles:  # the reference for what any Redis saver costs here
        floor_saver = RedisFloorSaver(redis.Redis.from_url(b.redis_url), b.prefix("redis-floor"))
        b.stack.callback(floor_saver.client.close)
        floor = Handle("redis-floor", REDIS_FLOOR_LABEL, "redis-floor", "sync", floor_saver)
        runners[floor.key] = (floor, builder.compile(checkpointer=floor_saver))
    samples: dict[str, list[float]] = {k: [] for k in runners}
    keys = list(runners)
    for r in range(repeats + 1):  # round 0 warms up every saver and is discarded
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            h, graph = runners[key]
            config: RunnableConfig = {
                "configurable": {"thread_id": b.thread(key, "graph")},
                "recursion_limit": 1000,
            }
            steps: list[Step] = [("invoke", functools.partial(invoke_react, h, graph, config))]
            d = run_steps(b, h, steps, {})["invoke"]
            if r:
                samples[key].append(d / supersteps)
    per_step = {k: median_us(v) for k, v in samples.items()}
    rows: dict[str, Any] = {}
    redis_floor = per_step.get("redis-floor")
    for key, (h, _) in runners.items():
        if h.saver is None:
            continue
        base = per_step[f"none-{h.mode}"]
        mem = per_step.get(floor_key(h))
        overhead = per_step[key] - base
        mem_overhead = mem - base if mem is not None else None
        floor_overhead = redis_floor - per_step["none-sync"] if redis_floor else None
        rows[key] = {
            "superstep_us": per_step[key],
            "overhead_us": overhead,
            "superstep_ratio": per_step[key] / mem if mem else None,
            # a difference of two noisy medians: no ratio unless InMemorySaver's is > 0
            "overhead_ratio": overhead / mem_overhead
            if mem_overhead and mem_overhead > 0
            else None,
            "overhead_vs_redis_floor": overhead / floor_overhead
            if floor_overhead and floor_overhead > 0
            else None,
        }
    return {
        "rounds": rounds,
        "supersteps": supersteps,
        "repeats": repeats,
        "no_checkpointer_us": {
            m: per_step[f"none-{m}"] for m in ("sync", "async") if f"none-{m}" in per_step
        },
        "savers": rows,
    }


# -- (b) micro ----------------------------------------------------------------------------
def workload_micro(b: Bench, rounds: int, history: int = 20) -> dict[str, Any]:
    messages = make_messages(MICRO_MESSAGES)
    threads = {k: (h, ThreadState(b.thread(h, "micro"), messages)) for k, h in b.handles.items()}
    for h, st in threads.values():  # history: the messages channel rewritten each time
        fill_thread(b, h, st, history, budget=float("inf"), messages_each=True)
    micro_rounds(b, threads, max(3, rounds // 10))  # warm-up, discarded
    medians = micro_rounds(b, threads, rounds)
    rows = {}
    for key, figs in medians.items():
        base = medians.get(floor_key(b.handles[key]))
        rows[key] = {
            **{f"{f}_us": v for f, v in figs.items()},
            **{f"{f}_ratio": v / base[f] if base else None for f, v in figs.items()},
        }
    return {"rounds": rounds, "messages": MICRO_MESSAGES, "history": history, "savers": rows}


# -- (c) thread length --------------------------------------------------------------------
def workload_length(b: Bench, levels: Sequence[int], rounds: int, budget: float) -> dict[str, Any]:
    """The micro figures on threads of each length. Every saver fills a fresh thread per
    level (puts of one changed channel); a saver whose fill would exceed ``budget``
    seconds skips that level and every longer one. All threads exist together and are
    measured in the same rounds, so the long/short ratio is not skewed by drift."""
    messages = make_messages(LENGTH_MESSAGES)
    out: dict[str, Any] = {k: {"levels": {}, "skipped": {}} for k in b.handles}
    threads: dict[tuple[str, int], tuple[Handle, ThreadState]] = {}
    for key, h in b.handles.items():
        for level in levels:
            if out[key]["skipped"]:
                out[key]["skipped"][str(level)] = "skipped at a shorter level"
                continue
            st = ThreadState(b.thread(h, f"len{level}"), messages)
            per_put = fill_thread(b, h, st, level, budget)
            if per_put is None:
                out[key]["skipped"][str(level)] = f"filling would take over {budget:g} s"
                print(f"    {h.label}: skip {level:,} checkpoints (fill > {budget:g} s)")
                continue
            threads[key, level] = (h, st)
            out[key]["levels"][str(level)] = {"fill_us_per_put": per_put * 1e6}
        print(f"    {h.label}: filled", flush=True)
    micro_rounds(b, threads, max(2, rounds // 10))  # warm-up, discarded
    for (key, level), figs in micro_rounds(b, threads, rounds).items():
        out[key]["levels"][str(level)].update({f"{f}_us": v for f, v in figs.items()})
    for h, st in threads.values():  # free Redis memory now, not at the end of the run
        b.do(h.delete_thread(st.thread_id))
    for row in out.values():  # longest measured level against the shortest
        lv = sorted(row["levels"], key=int)
        if len(lv) >= 2:
            lo, hi = row["levels"][lv[0]], row["levels"][lv[-1]]
            row["growth"] = {
                "from": int(lv[0]),
                "to": int(lv[-1]),
                **{f: hi[f"{f}_us"] / lo[f"{f}_us"] for f in MICRO_FIGURES},
            }
    return {
        "levels": list(levels),
        "rounds": rounds,
        "messages": LENGTH_MESSAGES,
        "fill_budget_s": budget,
        "savers": out,
    }


# -- (d) floor ----------------------------------------------------------------------------
def workload_floor(b: Bench, rounds: int) -> dict[str, Any]:
    """Our put against the least any Redis checkpointer must do for it: serialize the same
    payload (checkpoint without values, metadata, the changed value) and write it with
    one pipelined round trip of the same shape (2 HSET + ZADD). They alternate."""
    h = b.handles.get("durable")
    if h is None:
        return {"skipped": "needs the durable saver"}
    saver: RedisSaver = h.saver  # type: ignore[assignment]
    client, serde = saver.client, JsonPlusSerializer()
    st = ThreadState(b.thread(h, "floor"), make_messages(MICRO_MESSAGES))
    fill_thread(b, h, st, 1, budget=float("inf"))
    shadow = ThreadState(b.thread("floor", "floor"), st.messages)
    keys = {
        kind: f"{b.prefix('floor')}:{{{shadow.thread_id}}}:{kind}" for kind in ("cps", "cp", "bl")
    }

    def floor_put(cp: dict[str, Any], md: dict[str, Any], nv: dict[str, Any]) -> None:
        stored = {k: v for k, v in cp.items() if k != "channel_values"}
        t1, d1 = serde.dumps_typed(stored)
        t2, d2 = serde.dumps_typed(md)
        pipe = client.pipeline(transaction=False)
        pipe.hset(keys["cp"], cp["id"], b"".join((t1.encode(), d1, t2.encode(), d2)))
        for channel, version in nv.items():
            tv, dv = serde.dumps_typed(cp["channel_values"][channel])
            pipe.hset(keys["bl"], f"{channel}:{version}", tv.encode() + dv)
        pipe.zadd(keys["cps"], {cp["id"]: 0})
        pipe.execute()

    puts: list[float] = []
    floors: list[float] = []
    warmup = rounds // 10
    for i in range(warmup + rounds):
        cp, md, nv = st.next_checkpoint(saver)
        fcp, fmd, fnv = shadow.next_checkpoint(saver)
        for which in ("put", "floor") if i % 2 else ("floor", "put"):  # alternate the order
            t0 = time.perf_counter()
            if which == "put":
                st.config = saver.put(st.config, cp, md, nv)
            else:
                floor_put(fcp, fmd, fnv)
            d = time.perf_counter() - t0
            if i >= warmup:
                (puts if which == "put" else floors).append(d)
    put_us, floor_us = median_us(puts), median_us(floors)
    # What integrity costs: the same saver with its envelope's hashing switched off.
    envelope = saver.core.envelope
    envelopes = {"no hashing": NoHashEnvelope(), "xxh3-128": envelope}
    values = {"messages": st.messages}
    try:
        measure_integrity(saver, envelopes, values, max(5, rounds // 10))  # warm-up
        integrity = measure_integrity(saver, envelopes, values, rounds)
    finally:
        saver.core.envelope = envelope
    (base_put, base_get), (put, get) = integrity["no hashing"], integrity["xxh3-128"]
    return {
        "rounds": rounds,
        "put_us": put_us,
        "floor_us": floor_us,
        "ratio": put_us / floor_us,
        "integrity": {
            "put_us": put,
            "put_unhashed_us": base_put,
            "put_ratio": put / base_put,
            "get_tuple_us": get,
            "get_tuple_unhashed_us": base_get,
            "get_tuple_ratio": get / base_get,
        },
    }


# -- (e) async throughput -----------------------------------------------------------------
def workload_async(b: Bench, threads: int, repeats: int) -> dict[str, Any]:
    """Checkpoints/s of ``threads`` counter-graph runs: concurrently (asyncio.gather) on
    the async saver, and one after another on the sync saver of the same package."""
    rows: dict[str, Any] = {}
    for family in ("durable", "memory", "sqlite", "postgres", "valkey", "plainredis"):
        sync_h, async_h = b.handles.get(family), b.handles.get(f"{family}-async")
        if sync_h is not None and async_h is not None:
            try:
                rows[family] = async_pair(b, sync_h, async_h, threads, repeats)
            except Exception as exc:  # noqa: BLE001  (one pair failing must not hide the rest)
                rows[family] = {"sync": sync_h.label, "async": async_h.label, "error": repr(exc)}
                print(f"    {async_h.label}: failed: {exc!r}", flush=True)
    if "durable" in b.handles and "durable-async" in b.handles:
        for delay_ms in LATENCY_MS:
            try:
                rows[f"durable+{delay_ms}ms"] = durable_pair_over_latency(
                    b, delay_ms, threads, repeats
                )
            except Exception as exc:  # noqa: BLE001
                rows[f"durable+{delay_ms}ms"] = {
                    "sync": f"RedisSaver +{delay_ms} ms",
                    "async": f"AsyncRedisSaver +{delay_ms} ms",
                    "error": repr(exc),
                }
                print(f"    over {delay_ms} ms latency: failed: {exc!r}", flush=True)
    return {"threads": threads, "repeats": repeats, "pairs": rows}


LATENCY_MS = (1.0, 2.0, 5.0)  # added per round trip by benchmarks/latency_proxy.py


def durable_pair_over_latency(b: Bench, delay_ms: float, threads: int, repeats: int) -> dict:
    """The durable pair again, talking to Redis through a proxy that holds every burst
    back (Redis in another zone, not on loopback), where concurrency has waits to fill."""
    proxy = subprocess.Popen(
        [sys.executable, str(LATENCY_PROXY), *redis_address(b), str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        url = f"redis://127.0.0.1:{int(proxy.stdout.readline())}/0"
        ping = redis.Redis.from_url(url)
        rtt = []
        for _ in range(50):
            t0 = time.perf_counter()
            ping.ping()
            rtt.append(time.perf_counter() - t0)
        ping.close()
        prefix = b.prefix(f"latency{delay_ms:g}")
        with ExitStack() as stack:
            sync_saver = stack.enter_context(RedisSaver.from_conn_string(url, key_prefix=prefix))
            async_cm = AsyncRedisSaver.from_conn_string(url, key_prefix=prefix)
            async_saver = b.run(async_cm.__aenter__())
            stack.callback(lambda: b.run(async_cm.__aexit__(None, None, None)))
            sync_h = Handle(
                "durable", f"RedisSaver, +{delay_ms:g} ms", "durable", "sync", sync_saver
            )
            async_h = Handle(
                "durable-async",
                f"AsyncRedisSaver, +{delay_ms:g} ms",
                "durable",
                "async",
                async_saver,
            )
            row = async_pair(b, sync_h, async_h, threads, repeats)
        row["round_trip_us"] = median_us(rtt)
        return row
    finally:
        proxy.kill()
        proxy.wait()


def redis_address(b: Bench) -> tuple[str, str]:
    kwargs = b.redis.connection_pool.connection_kwargs
    return str(kwargs.get("host", "127.0.0.1")), str(kwargs.get("port", 6379))


def async_pair(b: Bench, sync_h: Handle, async_h: Handle, threads: int, repeats: int) -> dict:
    builder = graphs.counter_graph()
    sync_graph = builder.compile(checkpointer=sync_h.saver)
    async_graph = builder.compile(checkpointer=async_h.saver)

    def runs(h: Handle, r: int) -> list[tuple[dict[str, Any], RunnableConfig]]:
        return [
            ({"value": i, "trail": []}, {"configurable": {"thread_id": b.thread(h, f"e{r}-{i}")}})
            for i in range(threads)
        ]

    async def concurrent(batch: list[tuple[dict[str, Any], RunnableConfig]]) -> float:
        t0 = time.perf_counter()
        # return_exceptions: let every run finish before raising, leaving no task behind
        done = await asyncio.gather(
            *(async_graph.ainvoke(x, c, durability="sync") for x, c in batch),
            return_exceptions=True,
        )
        elapsed = time.perf_counter() - t0
        for result in done:
            if isinstance(result, BaseException):
                raise result
        return elapsed

    seq_times: list[float] = []
    conc_times: list[float] = []
    for r in range(repeats):
        batch = runs(sync_h, r)
        t0 = time.perf_counter()
        for x, c in batch:
            sync_graph.invoke(x, c, durability="sync")
        seq_times.append(time.perf_counter() - t0)
        conc_times.append(b.run(concurrent(runs(async_h, r))))
    per_run = len(list(sync_h.saver.list(batch[0][1])))  # checkpoints one run writes
    seq_cps = threads * per_run / statistics.median(seq_times)
    conc_cps = threads * per_run / statistics.median(conc_times)
    return {
        "sync": sync_h.label,
        "async": async_h.label,
        "checkpoints_per_run": per_run,
        "sequential_cps": seq_cps,
        "concurrent_cps": conc_cps,
        "ratio": conc_cps / seq_cps,
    }


# -- (f) storage --------------------------------------------------------------------------
class SizeTap:
    """Counts the serialized size of the new data a saver is handed: the checkpoint
    without its values, the metadata, each changed channel value and each pending write.
    Installed as instance attributes over put/put_writes, removed afterwards."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver, self.serde = saver, JsonPlusSerializer()
        self.new_bytes = 0
        self.puts = 0

    def size(self, value: Any) -> int:
        return len(self.serde.dumps_typed(value)[1])

    def __enter__(self) -> Self:
        put, put_writes = self.saver.put, self.saver.put_writes

        def tapped_put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            values = checkpoint.get("channel_values", {})
            stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
            self.new_bytes += self.size(stored) + self.size(metadata)
            self.new_bytes += sum(self.size(values[c]) for c in new_versions if c in values)
            self.puts += 1
            return put(config, checkpoint, metadata, new_versions)

        def tapped_put_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> Any:
            self.new_bytes += sum(self.size(v) for _, v in writes)
            return put_writes(config, writes, task_id, task_path)

        self.saver.put = tapped_put  # type: ignore[method-assign]
        self.saver.put_writes = tapped_put_writes  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.saver.put, self.saver.put_writes


@dataclass
class Footprint:
    """What a thread's keys occupy. Logical bytes: key names, hash fields and values,
    string values, list/set elements, sorted-set members (+8 for the score)."""

    logical: int = 0
    memory: int = 0  # MEMORY USAGE ... SAMPLES 0: Redis's own allocation
    keys: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)  # logical bytes per key kind

    def __sub__(self, other: Footprint) -> Footprint:
        kinds = set(self.by_kind) | set(other.by_kind)
        return Footprint(
            self.logical - other.logical,
            self.memory - other.memory,
            self.keys,
            {k: self.by_kind.get(k, 0) - other.by_kind.get(k, 0) for k in kinds},
        )


def footprint(client: redis.Redis, patterns: Sequence[str]) -> Footprint:
    keys = {k for p in patterns for k in client.scan_iter(match=p, count=1000)}
    fp = Footprint(keys=len(keys))
    for key in keys:
        raw_type = client.type(key)
        rtype = raw_type.decode() if isinstance(raw_type, bytes) else str(raw_type)
        size = len(key)
        if rtype == "string":
            size += client.strlen(key)
        elif rtype == "hash":
            size += sum(len(f) + client.hstrlen(key, f) for f in client.hkeys(key))
        elif rtype == "zset":
            size += sum(len(m) + 8 for m in client.zrange(key, 0, -1))
        elif rtype == "list":
            size += sum(len(m) for m in client.lrange(key, 0, -1))
        elif rtype == "set":
            size += sum(len(m) for m in client.smembers(key))
        # our keys end in their kind (cp, bl, cps, ...); others are grouped by type
        suffix = key.decode(errors="replace").rsplit(":", 1)[-1]
        kind = suffix if suffix in THREAD_KEY_KINDS else rtype
        fp.by_kind[kind] = fp.by_kind.get(kind, 0) + size
        fp.logical += size
        fp.memory += client.memory_usage(key, samples=0) or 0
    return fp


def workload_storage(b: Bench, rounds: int, small_puts: int) -> dict[str, Any]:
    """Bytes a thread occupies in Redis per checkpoint, against the serialized new data:
    a ReAct graph run (messages grow each step), and a thread where one small channel
    changes per checkpoint (fixed per-checkpoint costs dominate)."""
    rows: dict[str, Any] = {}
    for key, h in b.handles.items():
        if h.family not in REDIS_FAMILIES or h.mode != "sync" or h.thread_patterns is None:
            continue
        row: dict[str, Any] = {}
        thread = b.thread(h, "store-react")
        graph = graphs.react_graph(rounds=rounds, payload=PAYLOAD).compile(checkpointer=h.saver)
        config: RunnableConfig = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
        with SizeTap(h.saver) as tap:
            graph.invoke(graphs.react_input(), config, durability="sync")
        row["react"] = storage_row(tap, footprint(b.redis, h.thread_patterns(thread)))
        # one small channel per checkpoint: the growth past the first (100-message) put
        st = ThreadState(b.thread(h, "store-small"), make_messages(MICRO_MESSAGES))
        fill_thread(b, h, st, 1, budget=float("inf"))
        before = footprint(b.redis, h.thread_patterns(st.thread_id))
        with SizeTap(h.saver) as tap:
            fill_thread(b, h, st, small_puts, budget=float("inf"))
        row["small"] = storage_row(
            tap, footprint(b.redis, h.thread_patterns(st.thread_id)) - before
        )
        rows[key] = row
    return {"react_rounds": rounds, "small_puts": small_puts, "savers": rows}


def storage_row(tap: SizeTap, fp: Footprint) -> dict[str, Any]:
    n = tap.puts
    return {
        "checkpoints": n,
        "keys": fp.keys,
        "new_bytes_per_cp": tap.new_bytes / n,
        "stored_bytes_per_cp": fp.logical / n,
        "memory_usage_per_cp": fp.memory / n,
        "ratio": fp.logical / tap.new_bytes,
        "memory_ratio": fp.memory / tap.new_bytes,
        "stored_bytes_per_cp_by_kind": {k: v / n for k, v in sorted(fp.by_kind.items())},
    }


# -- (g) recovery -------------------------------------------------------------------------
def prepare_recovery_thread(h: Handle, thread: str, rounds: int, steps: int) -> None:
    """A thread stopped in the middle of a run: ``steps`` supersteps done, more to go."""
    graph = graphs.react_graph(rounds=rounds, payload=PAYLOAD).compile(checkpointer=h.saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    for i, _ in enumerate(
        graph.stream(graphs.react_input(), config, durability="sync", stream_mode="updates")
    ):
        if i + 1 >= steps:
            break


def run_child(kind: str, target: str, prefix: str, thread: str, rounds: int) -> dict[str, Any]:
    """Run recovery_child.py; its stage timestamps minus our launch time."""
    launched = time.time()
    proc = subprocess.run(
        [
            sys.executable,
            str(RECOVERY_CHILD),
            kind,
            target,
            prefix,
            thread,
            str(rounds),
            str(PAYLOAD),
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
        cwd=str(ROOT),
    )
    if proc.returncode:
        raise RuntimeError(f"recovery child failed: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    s = result["stamps"]
    return {
        "interpreter_s": s["start"] - launched,
        "import_s": s["import"] - s["start"],
        "connect_s": s["connect"] - s["import"],
        "get_tuple_s": s["get_tuple"] - s["connect"],
        "step_s": s["step"] - s["get_tuple"],
        "total_s": s["step"] - launched,
        "resumed_from_step": result["resumed_from_step"],
        "step_after": result["step_after"],
    }


def child_target(b: Bench, h: Handle) -> tuple[str, str] | None:
    """(target, prefix) for recovery_child.py, for the savers it knows."""
    if h.family in ("durable", "plainredis"):
        return b.redis_url, b.prefix(h.key)
    if h.family == "valkey":
        return b.redis_url, "-"
    if h.family == "sqlite":
        return str(b.tmp / f"{h.key}.sqlite"), "-"
    if h.family == "postgres":
        return b.postgres_conninfo(), "-"
    return None


def median_dict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k.endswith("_s")}
    out["resumed_from_step"] = rows[-1]["resumed_from_step"]
    out["step_after"] = rows[-1]["step_after"]
    out["runs"] = len(rows)
    return out


def workload_recovery(b: Bench, repeats: int, reads: int, competitors: bool) -> dict[str, Any]:
    """Launch-to-first-resumed-step of a fresh process, per persistent sync saver (ours
    also with its newest checkpoint damaged: it must fall back one checkpoint), and our
    get_tuple(latest) alone, clean and damaged."""
    rounds, steps = 40, 20
    rows: dict[str, Any] = {}
    for key, h in b.handles.items():
        if h.mode != "sync" or (h.family != "durable" and not competitors):
            continue
        target = child_target(b, h)
        if target is None:
            continue
        clean, damaged = [], []
        for _ in range(repeats):
            thread = b.thread(h, "recover")
            prepare_recovery_thread(h, thread, rounds, steps)
            clean.append(run_child(h.family, *target, thread, rounds))
            if h.family == "durable":
                thread = b.thread(h, "recover-dmg")
                prepare_recovery_thread(h, thread, rounds, steps)
                damage_newest_checkpoint(b.redis_url, b.prefix(h.key), thread)
                damaged.append(run_child(h.family, *target, thread, rounds))
        rows[key] = {"clean": median_dict(clean)}
        if damaged:
            rows[key]["damaged"] = median_dict(damaged)
    read_path = recovery_read_path(b, reads) if "durable" in b.handles else None
    return {"repeats": repeats, "thread_supersteps": steps, "savers": rows, "read_path": read_path}


def recovery_read_path(b: Bench, reads: int) -> dict[str, Any]:
    """get_tuple(latest) on a 20-superstep ReAct thread; damaged: the newest checkpoint
    record has one bit flipped, so each read verifies it, falls back one checkpoint and
    quarantines it. The damage is put back (untimed) before every read."""
    h = b.handles["durable"]
    saver: RedisSaver = h.saver  # type: ignore[assignment]
    logging.getLogger("langgraph_durable").addHandler(logging.NullHandler())
    logging.getLogger("langgraph_durable").propagate = False  # records built, not printed
    times: dict[str, list[float]] = {"clean": [], "damaged": []}
    thread = b.thread(h, "read")
    prepare_recovery_thread(h, thread, 40, 20)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    newest = saver.get_tuple(config)
    assert newest is not None
    tk = saver.keys.thread(thread)
    member = saver.keys.checkpoint_member("", newest.config["configurable"]["checkpoint_id"])
    good: bytes = saver.client.hget(tk.cp, member)  # type: ignore[assignment]
    bad = good[:-1] + bytes([good[-1] ^ 1])
    for i in range(reads + reads // 10):
        for state in ("clean", "damaged") if i % 2 else ("damaged", "clean"):
            pipe = saver.client.pipeline(transaction=False)
            pipe.hset(tk.cp, member, good if state == "clean" else bad)
            pipe.zadd(tk.cps, {member: 0})
            pipe.execute()
            t0 = time.perf_counter()
            got = saver.get_tuple(config)
            d = time.perf_counter() - t0
            assert got is not None and (got.config == newest.config) == (state == "clean")
            if i >= reads // 10:
                times[state].append(d)
    clean_us, damaged_us = median_us(times["clean"]), median_us(times["damaged"])
    return {
        "reads": reads,
        "clean_us": clean_us,
        "damaged_us": damaged_us,
        "ratio": damaged_us / clean_us,
    }


# -- profile ------------------------------------------------------------------------------
def profile_durable(b: Bench, out: Path, rounds: int) -> str:
    """cProfile of our put and get_tuple on the micro thread: where the time goes."""
    import cProfile
    import io
    import pstats

    h = b.handles["durable"]
    st = ThreadState(b.thread(h, "profile"), make_messages(MICRO_MESSAGES))
    fill_thread(b, h, st, 5, budget=float("inf"), messages_each=True)
    text = []
    for name in ("put", "get_tuple"):
        prof = cProfile.Profile()
        for i in range(rounds):
            cp, md, nv = st.next_checkpoint(h.saver)
            if name == "put":
                prof.enable()
                st.config = h.saver.put(st.config, cp, md, nv)
                prof.disable()
            else:
                st.config = h.saver.put(st.config, cp, md, nv)
                prof.enable()
                h.saver.get_tuple(st.latest)
                prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
        text.append(
            f"===== RedisSaver.{name}, {rounds} calls, sorted by own time =====\n{buf.getvalue()}"
        )
    report = "\n".join(text)
    (out / "profile.txt").write_text(report)
    return report


# -- machine ------------------------------------------------------------------------------
def server_version(client: redis.Redis) -> str:
    info = client.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    return f"{name} {info.get('valkey_version') or info.get('redis_version')}"


def round_trip(client: redis.Redis, n: int = 200) -> dict[str, float]:
    """PING latency, back to back and after 5 ms of idleness: on a VM the second is what
    a checkpointer sees between supersteps, when the server has gone to sleep."""
    hot, idle = [], []
    for i in range(n):
        if i % 4 == 0:
            time.sleep(0.005)
            t0 = time.perf_counter()
            client.ping()
            idle.append(time.perf_counter() - t0)
        else:
            t0 = time.perf_counter()
            client.ping()
            hot.append(time.perf_counter() - t0)
    return {"back_to_back": median_us(hot), "after_5ms_idle": median_us(idle)}


def source_state() -> dict[str, Any]:
    """The commit measured, and which package files differ from it (editable install)."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return out.stdout.rstrip("\n")  # keep the leading blanks of porcelain status lines

    changed = git("status", "--porcelain", "--", "langgraph_durable")
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip() or None,
        "uncommitted": [line[3:] for line in changed.splitlines()],
    }


def machine_info(b: Bench) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    packages: dict[str, str | None] = {}
    for name in (
        "langgraph",
        "langgraph-checkpoint",
        "langchain-core",
        "redis",
        "hiredis",
        "msgpack",
        "xxhash",
        "langgraph-durable",
        "langgraph-checkpoint-sqlite",
        "aiosqlite",
        "langgraph-checkpoint-postgres",
        "psycopg",
        "psycopg-binary",
        "langgraph-checkpoint-aws",
        "valkey",
        "langgraph-checkpoint-plainredis",
        "langgraph-checkpoint-redis",
    ):
        try:
            packages[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            packages[name] = None
    pg_version = None
    if b.pg_schema is not None:
        import psycopg

        with psycopg.connect(b.pg_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            pg_version = row[0] if row else None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "redis_round_trip_us": round_trip(b.redis),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "redis_server": server_version(b.redis),
        "redis_url": b.redis_url,
        "postgres_server": pg_version,
        "sqlite": sqlite3.sqlite_version,
        "hiredis_parser": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
        "langgraph_durable_source": source_state(),
        "packages": packages,
    }


# -- targets and report -------------------------------------------------------------------
def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target as (what, value, limit, PASS/MISS), for ours (sync and async)."""
    out: list[dict[str, Any]] = []

    def check(
        what: str,
        value: float | None,
        limit: float,
        higher_is_better: bool = False,
        unit: str = "x",
    ) -> None:
        if value is None:
            return
        ok = value >= limit if higher_is_better else value <= limit
        out.append(
            {
                "target": what,
                "value": value,
                "limit": limit,
                "unit": unit,
                "op": ">=" if higher_is_better else "<=",
                "pass": ok,
            }
        )

    ours = [k for k in ("durable", "durable-async") if k in r["config"]["savers"]]
    for key in ours:
        label = SAVERS[key][0].split(" ")[0]
        g = r.get("graph", {}).get("savers", {}).get(key)
        if g:
            check(f"{label} superstep overhead vs InMemorySaver", g["overhead_ratio"], 1.25)
        m = r.get("micro", {}).get("savers", {}).get(key)
        if m:
            check(f"{label} get_tuple vs InMemorySaver", m["get_tuple_ratio"], 1.15)
            check(f"{label} list10 vs InMemorySaver", m["list10_ratio"], 1.0)
        growth = r.get("length", {}).get("savers", {}).get(key, {}).get("growth")
        if growth:
            for f in MICRO_FIGURES:
                check(
                    f"{label} {f}: {growth['to']:,}-cp vs {growth['from']:,}-cp thread",
                    growth[f],
                    1.2,
                )
    fl = r.get("floor", {})
    if "ratio" in fl:
        check("RedisSaver put vs floor (serialize + 1 pipelined round trip)", fl["ratio"], 1.5)
    for f in ("put", "get_tuple"):
        if f"{f}_ratio" in fl.get("integrity", {}):
            check(
                f"RedisSaver {f}: integrity (xxh3-128) vs unhashed",
                fl["integrity"][f"{f}_ratio"],
                1.05,
            )
    for kind in ("react", "small"):
        s = r.get("storage", {}).get("savers", {}).get("durable", {}).get(kind)
        if s:
            check(f"RedisSaver stored bytes vs serialized new data ({kind})", s["ratio"], 1.1)
    for pair, a in r.get("async", {}).get("pairs", {}).items():
        if pair.split("+")[0] == "durable" and "ratio" in a:
            n = r["async"]["threads"]
            where = f", +{pair.split('+')[1]} per round trip" if "+" in pair else ", loopback"
            check(
                f"AsyncRedisSaver {n} concurrent runs vs RedisSaver sequential{where}",
                a["ratio"],
                4.0,
                True,
            )
    rec = r.get("recovery", {}).get("savers", {}).get("durable", {})
    for kind in ("clean", "damaged"):
        if kind in rec:
            check(
                f"recovery, launch to first resumed step ({kind})",
                rec[kind]["total_s"],
                2.0,
                unit="s",
            )
    micro = r.get("micro", {}).get("savers", {})
    for key in ours:  # against the fastest other Redis saver of the same API, per figure
        mode = SAVERS[key][2]
        rivals = [
            k
            for k in micro
            if SAVERS[k][1] in REDIS_FAMILIES and SAVERS[k][1] != "durable" and SAVERS[k][2] == mode
        ]
        if key not in micro or not rivals:
            continue
        for f in MICRO_FIGURES:
            best = min(rivals, key=lambda k: micro[k][f"{f}_us"])
            ratio = micro[key][f"{f}_us"] / micro[best][f"{f}_us"]
            check(
                f"{SAVERS[key][0].split(' ')[0]} {f} vs fastest other Redis saver "
                f"({SAVERS[best][0]})",
                ratio,
                1.0,
            )
    return out


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fx(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}×"


def fu(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def mark(value: float | None, limit: float) -> str:
    return "" if value is None else ("PASS" if value <= limit else "**MISS**")


def label(key: str) -> str:
    return SAVERS[key][0]


def section(title: str, *body: str) -> list[str]:
    return ["", f"## {title}", "", *body]


def render_machine(r: dict[str, Any]) -> list[str]:
    m = r["machine"]
    rtt = m["redis_round_trip_us"]
    load = (m["load_average_at_start"][0], r.get("load_average_at_end", [float("nan")])[0])
    rows = [
        ["CPU", m["cpu"]],
        ["cores", m["cores"]],
        ["Python", m["python"]],
        ["platform", m["platform"]],
        ["Redis server", m["redis_server"]],
        ["PostgreSQL server", m["postgres_server"] or "—"],
        ["SQLite", m["sqlite"]],
        ["redis-py parser", "hiredis" if m["hiredis_parser"] else "pure Python"],
        [
            "Redis PING",
            (
                f"{rtt['back_to_back']:.0f} µs back to back, "
                f"{rtt['after_5ms_idle']:.0f} µs after 5 ms idle"
            ),
        ],
        ["load average, 1 min (start → end)", f"{load[0]:.2f} → {load[1]:.2f}"],
        ["langgraph-durable source", source_label(m["langgraph_durable_source"])],
    ]
    rows += [[f"`{name}`", version or "not installed"] for name, version in m["packages"].items()]
    notes = [f"- {note}" for note in r.get("notes", [])]
    return section("Machine", md_table(["", ""], rows), "", *notes)


def source_label(src: dict[str, Any]) -> str:
    dirty = src["uncommitted"]
    return f"commit {src['commit']}" + (
        f" + uncommitted changes to {', '.join(dirty)}" if dirty else ""
    )


def render_targets(r: dict[str, Any]) -> list[str]:
    def unit(t: dict[str, Any], v: float) -> str:
        return f"{v:.2f}×" if t["unit"] == "x" else f"{v:.2f} s"

    rows = [
        [
            t["target"],
            unit(t, t["value"]),
            f"{t['op']} {unit(t, t['limit'])}",
            "PASS" if t["pass"] else "**MISS**",
        ]
        for t in r.get("targets", [])
    ]
    return section("Targets (langgraph-durable)", md_table(["target", "value", "limit", ""], rows))


def render_graph(g: dict[str, Any]) -> list[str]:
    base = ", ".join(f"{fu(v)} µs ({k} API)" for k, v in g["no_checkpointer_us"].items())
    rows = []
    for k, v in g["savers"].items():
        ours = k in SAVERS and SAVERS[k][1] == "durable"
        rows.append(
            [
                REDIS_FLOOR_LABEL if k == "redis-floor" else label(k),
                fu(v["superstep_us"]),
                fx(v["superstep_ratio"]),
                fu(v["overhead_us"]),
                fx(v["overhead_ratio"]),
                fx(v.get("overhead_vs_redis_floor")) if ours and k == "durable" else "",
                mark(v["overhead_ratio"], 1.25) if ours else "",
            ]
        )
    return section(
        f"(a) ReAct graph, {g['rounds']} rounds ({g['supersteps']} supersteps), "
        f'durability="sync", median of {g["repeats"]}',
        f"Per superstep without a checkpointer: {base}. Overhead = time per superstep minus "
        "that; × InMemory compares it with InMemorySaver's overhead. "
        f"{REDIS_FLOOR_LABEL} is InMemorySaver plus one pipelined Redis write of the "
        "serialized new data per put and per put_writes, nothing else: what talking to "
        "Redis at all costs on this machine (× floor compares our overhead with its).",
        "",
        md_table(
            [
                "saver",
                "µs/superstep",
                "× InMemory",
                "overhead µs",
                "overhead × InMemory",
                "overhead × Redis floor",
                "target ≤1.25× InMemory",
            ],
            rows,
        ),
    )


def render_micro(mi: dict[str, Any]) -> list[str]:
    rows = [
        [label(k), *(f"{fu(v[f + '_us'])} ({fx(v[f + '_ratio'])})" for f in MICRO_FIGURES)]
        for k, v in mi["savers"].items()
    ]
    return section(
        f"(b) micro: {mi['messages']}-message thread (~{mi['messages'] * PAYLOAD // 1000} KB), "
        f"median of {mi['rounds']} rounds, µs (× InMemorySaver)",
        f"Each round: put (only a small `counter` channel changed), put_writes (2 writes), "
        f"get_tuple(latest), list(limit=10). The thread starts with {mi['history']} "
        "checkpoints; the savers take turns every round.",
        "",
        md_table(["saver", *MICRO_FIGURES], rows),
    )


def render_length(ln: dict[str, Any]) -> list[str]:
    rows = []
    for k, v in ln["savers"].items():
        for level, figs in sorted(v["levels"].items(), key=lambda x: int(x[0])):
            rows.append(
                [
                    label(k),
                    f"{int(level):,}",
                    *(fu(figs.get(f + "_us")) for f in MICRO_FIGURES),
                    fu(figs["fill_us_per_put"]),
                ]
            )
        for level, why in v["skipped"].items():
            rows.append([label(k), f"{int(level):,}", f"skipped: {why}", "", "", "", ""])
        if "growth" in v:
            gr = v["growth"]
            rows.append(
                [
                    label(k),
                    f"**{gr['to']:,} ÷ {gr['from']:,}**",
                    *(fx(gr[f]) for f in MICRO_FIGURES),
                    "",
                ]
            )
    levels = ", ".join(f"{x:,}" for x in ln["levels"])
    return section(
        f"(c) thread length: micro figures (µs) at {levels} checkpoints per thread",
        f"{ln['messages']}-message state; median of {ln['rounds']} rounds per level (they add "
        f"{ln['rounds']} checkpoints to the thread). Each level is a fresh thread filled by "
        f"puts; a saver whose fill would take over {ln['fill_budget_s']:g} s skips the level.",
        "",
        md_table(["saver", "checkpoints", *MICRO_FIGURES, "fill µs/put"], rows),
    )


def render_floor(fl: dict[str, Any]) -> list[str]:
    out = section(
        "(d) the floor",
        "Floor: `JsonPlusSerializer().dumps_typed` of what the put stores (checkpoint without "
        "values, metadata, the changed value), written with one `pipeline(transaction=False)` "
        f"round trip (2 HSET + ZADD); alternating with RedisSaver.put, median of {fl['rounds']}.",
        "",
        md_table(
            ["RedisSaver.put µs", "floor µs", "put ÷ floor", "target ≤1.5×"],
            [[fu(fl["put_us"]), fu(fl["floor_us"]), fx(fl["ratio"]), mark(fl["ratio"], 1.5)]],
        ),
    )
    i = fl.get("integrity")
    if i:
        out += [
            "",
            (
                "What integrity costs: put (the whole 100-message state) and get_tuple(latest) "
                "with the default xxh3-128 envelope against the same saver with hashing "
                f"switched off (`benchmarks/integrity_cost.py`), alternating, median of "
                f"{fl['rounds']}."
            ),
            "",
            md_table(
                ["", "checksummed µs", "unhashed µs", "ratio", "target ≤1.05×"],
                [
                    [f, fu(i[f"{f}_us"]), fu(i[f"{f}_unhashed_us"]), fx(i[f"{f}_ratio"], 3)]
                    + [mark(i[f"{f}_ratio"], 1.05)]
                    for f in ("put", "get_tuple")
                ],
            ),
        ]
    return out


def render_async(a: dict[str, Any]) -> list[str]:
    rows = [
        [f"{v['async']} vs {v['sync']}", f"failed: {v['error']}", "", "", ""]
        if "error" in v
        else [
            f"{v['async']} vs {v['sync']}",
            v["checkpoints_per_run"],
            fu(v["sequential_cps"]),
            fu(v["concurrent_cps"]),
            fx(v["ratio"], 1),
        ]
        for v in a["pairs"].values()
    ]
    rtts = [
        f"+{k.split('+')[1]}: PING {fu(v['round_trip_us'])} µs"
        for k, v in a["pairs"].items()
        if "round_trip_us" in v
    ]
    return section(
        f"(e) async: {a['threads']} counter-graph runs, median of {a['repeats']}",
        "Concurrent: all runs at once with asyncio.gather on the async saver. Sequential: "
        "the same runs one after another with the sync saver. Target for ours: ≥4×. "
        "On loopback every run is CPU-bound (InMemorySaver shows LangGraph's own ceiling); "
        "the `+N ms` rows talk to the same Redis through `benchmarks/latency_proxy.py`, "
        "which holds each burst back N ms in all (Redis in another zone)"
        + (f" ({'; '.join(rtts)})." if rtts else "."),
        "",
        md_table(
            ["async vs sync saver", "cp/run", "sequential cp/s", "concurrent cp/s", "ratio"], rows
        ),
    )


def render_storage(st: dict[str, Any]) -> list[str]:
    rows = [
        [
            label(k),
            kind,
            s["checkpoints"],
            fu(s["new_bytes_per_cp"]),
            fu(s["stored_bytes_per_cp"]),
            fx(s["ratio"]),
            fu(s["memory_usage_per_cp"]),
            fx(s["memory_ratio"]),
        ]
        for k, v in st["savers"].items()
        for kind, s in v.items()
    ]
    return section(
        "(f) storage per checkpoint (Redis savers)",
        f"`react`: one {st['react_rounds']}-round ReAct run, the thread's keys in total. "
        f"`small`: {st['small_puts']} puts changing one small channel of a 100-message "
        "thread, the growth. New = serialized checkpoint without values + metadata + changed "
        "values + pending writes (JsonPlusSerializer). Stored = key names + fields + values + "
        "index members (+8 per score). MEMORY USAGE = Redis's allocation. Target for ours: "
        "stored ≤1.1× new.",
        "",
        md_table(
            [
                "saver",
                "workload",
                "checkpoints",
                "new B/cp",
                "stored B/cp",
                "stored ÷ new",
                "MEMORY USAGE B/cp",
                "memory ÷ new",
            ],
            rows,
        ),
    )


def render_recovery(rc: dict[str, Any]) -> list[str]:
    rows = [
        [
            label(k),
            kind,
            f"{s['interpreter_s']:.2f}",
            f"{s['import_s']:.2f}",
            f"{s['connect_s'] * 1000:.0f} ms",
            f"{s['get_tuple_s'] * 1000:.1f} ms",
            f"{s['step_s'] * 1000:.0f} ms",
            f"**{s['total_s']:.2f}**",
            f"{s['resumed_from_step']} → {s['step_after']}",
        ]
        for k, v in rc["savers"].items()
        for kind, s in v.items()
    ]
    out = section(
        f"(g) recovery: fresh process, median of {rc['repeats']}",
        f"A thread stopped after {rc['thread_supersteps']} supersteps of the 40-round ReAct "
        "graph. A new Python process imports, connects, reads the latest checkpoint and runs "
        "one persisted superstep. `damaged`: the newest checkpoint has one flipped bit, so the "
        "read falls back one checkpoint. Seconds unless marked.",
        "",
        md_table(
            [
                "saver",
                "thread",
                "interpreter",
                "import",
                "connect",
                "get_tuple",
                "one step",
                "total",
                "step read → after",
            ],
            rows,
        ),
    )
    rp = rc.get("read_path")
    if rp:
        out += [
            "",
            (
                f"Read path alone (RedisSaver.get_tuple latest, median of {rp['reads']}): "
                f"clean {fu(rp['clean_us'])} µs, newest checkpoint damaged "
                f"{fu(rp['damaged_us'])} µs ({fx(rp['ratio'])})."
            ),
        ]
    return out


def render(r: dict[str, Any]) -> str:
    mode = "quick" if r["config"]["quick"] else "full"
    parts = [
        "# langgraph-durable benchmark",
        "",
        (
            f"One run, {r['started']}, {mode} mode: `{r['config']['command']}` "
            f"({r['elapsed_s']:.0f} s). Every ratio comes from this run; async rows are compared "
            "with InMemorySaver driven through its async API."
        ),
    ]
    parts += render_machine(r)
    if r["skipped"]:
        rows = [[label(k), why] for k, why in r["skipped"].items()]
        parts += section("Skipped savers", md_table(["saver", "reason"], rows))
    parts += render_targets(r)
    renderers: list[tuple[str, Callable[[dict[str, Any]], list[str]]]] = [
        ("graph", render_graph),
        ("micro", render_micro),
        ("length", render_length),
        ("floor", render_floor),
        ("async", render_async),
        ("storage", render_storage),
        ("recovery", render_recovery),
    ]
    for name, fn in renderers:
        data = r.get(name)
        if data and "error" in data:
            parts += section(f"{name}: failed", f"`{data['error']}`")
        elif data and "skipped" not in data:
            parts += fn(data)
    parts += [
        "",
        (
            f"Cleanup: removed {r['cleanup']['redis_keys_removed']} Redis keys of this "
            f"run, {r['cleanup']['redis_keys_left']} left."
        ),
        "",
    ]
    return "\n".join(parts)


# -- main ---------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small n: a smoke run under ~2 minutes")
    p.add_argument(
        "--savers", default=",".join(SAVERS), help=f"comma-separated, from: {', '.join(SAVERS)}"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="where RESULTS.md and results.json go",
    )
    p.add_argument("--workloads", default="abcdefg", help="subset of a..g to run (default all)")
    p.add_argument(
        "--max-length", type=int, default=None, help="cap on the thread-length levels of (c)"
    )
    p.add_argument(
        "--fill-budget",
        type=float,
        default=60.0,
        help="seconds a saver may take to fill one (c) thread",
    )
    p.add_argument(
        "--redis-url", default=None, help="default: REDIS_URL, local 6379, else embedded"
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile RedisSaver put/get_tuple into OUT/profile.txt",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    q = args.quick
    wanted = [s.strip() for s in args.savers.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SAVERS]
    if unknown:
        raise SystemExit(f"unknown saver(s) {unknown}; choose from {list(SAVERS)}")
    keys = ["memory"] + [s for s in wanted if s != "memory"]  # the floor is always there
    if any(SAVERS[k][2] == "async" for k in keys) and "memory-async" not in keys:
        keys.insert(1, "memory-async")
    keys = sorted(dict.fromkeys(keys), key=list(SAVERS).index)
    levels = [10, 200] if q else [10, 1_000, 10_000]
    if args.max_length:
        levels = [lv for lv in levels if lv <= args.max_length] or [min(args.max_length, 10)]
    args.out.mkdir(parents=True, exist_ok=True)

    bench = Bench(args)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "config": {
            "quick": q,
            "savers": keys,
            "levels": levels,
            "workloads": args.workloads,
            "command": " ".join(
                ["python benchmarks/bench.py", *(sys.argv[1:] if argv is None else argv)]
            ),
        },
    }
    t_run = time.perf_counter()
    try:
        print(f"run tag {bench.tag}; Redis {bench.redis_url}", flush=True)
        bench.open(keys)
        results["skipped"] = bench.skipped
        results["notes"] = bench.notes
        results["machine"] = machine_info(bench)
        plan: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
            (
                "a",
                "graph",
                lambda: workload_graph(bench, rounds=10 if q else 40, repeats=2 if q else 7),
            ),
            ("b", "micro", lambda: workload_micro(bench, rounds=30 if q else 200)),
            (
                "c",
                "length",
                lambda: workload_length(
                    bench, levels, rounds=20 if q else 100, budget=args.fill_budget
                ),
            ),
            ("d", "floor", lambda: workload_floor(bench, rounds=50 if q else 500)),
            (
                "e",
                "async",
                lambda: workload_async(bench, threads=20 if q else 100, repeats=1 if q else 3),
            ),
            (
                "f",
                "storage",
                lambda: workload_storage(
                    bench, rounds=10 if q else 40, small_puts=20 if q else 100
                ),
            ),
            (
                "g",
                "recovery",
                lambda: workload_recovery(
                    bench, repeats=1 if q else 3, reads=30 if q else 200, competitors=not q
                ),
            ),
        ]
        for letter, name, fn in plan:
            if letter not in args.workloads:
                continue
            gc.collect()
            t0 = time.perf_counter()
            print(f"({letter}) {name} ...", flush=True)
            try:
                results[name] = fn()
            except Exception as exc:  # noqa: BLE001  (keep the other workloads' figures)
                traceback.print_exc()
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"({letter}) {name} done in {time.perf_counter() - t0:.1f} s", flush=True)
            # partial results survive a crash or a Ctrl-C later in the run
            (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
        if args.profile and "durable" in bench.handles:
            profile_durable(bench, args.out, rounds=50 if q else 300)
    finally:
        results["cleanup"] = bench.close()
    results["elapsed_s"] = time.perf_counter() - t_run
    results["load_average_at_end"] = os.getloadavg()
    results["targets"] = targets(results)
    report = render(results)
    (args.out / "RESULTS.md").write_text(report)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print()
    print(report)
    print(
        f"wrote {args.out / 'RESULTS.md'} and {args.out / 'results.json'} ({results['elapsed_s']:.0f} s)"
    )


if __name__ == "__main__":
    main()
