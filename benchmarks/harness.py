"""The harness every workload runs in: timing, the saver handles, the run (its event loop,
its open savers, the cleanup that deletes exactly what it created), and shared sizes."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import redis
import redis.asyncio

from tests.helpers.redis_keys import delete_matching

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
K = TypeVar("K")


PAYLOAD = 1500  # characters per AI message, as the "1-2 KB per step"


MICRO_MESSAGES = 100  # messages in the newest checkpoint of the micro thread (~150 KB)


LENGTH_MESSAGES = 10  # smaller state for (c): savers that copy the whole state per


MICRO_FIGURES = ("put", "put_writes", "get_tuple", "list10", "list10_any_ns")


class Skip(Exception):
    """A saver that cannot run here; the message says why."""


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


def p99_us(samples: Sequence[float]) -> float:
    """The 99th percentile (nearest rank): with fewer than 100 samples, the worst."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1e6


async def _collect(aiter: Any) -> list[Any]:
    return [item async for item in aiter]


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
    def open(self, keys: Sequence[str], openers: Mapping[str, Callable[..., Any]]) -> None:
        """Open each saver of ``keys`` with its family's opener (``savers.OPENERS``)."""
        for key in keys:
            label, family, mode = SAVERS[key]
            try:
                saver, patterns = openers[family](self, key, mode)
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
        from langgraph_durable.tools.embedded import resolve_url

        return resolve_url(None)


# key -> (label, family, mode). Families group the sync and async flavour of one package.
OVERHEAD_GUARD = 1.25  # superstep overhead vs the Redis floor, a guard (issue 32; aim 1.05x)
GET_TUPLE_GUARD = 1.15  # get_tuple vs its floor (issue 44)
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


def server_version(client: redis.Redis) -> str:
    info = client.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    return f"{name} {info.get('valkey_version') or info.get('redis_version')}"


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
