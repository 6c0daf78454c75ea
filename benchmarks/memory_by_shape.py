"""Storage by state shape: what one thread costs after N steps, per saver.

    python benchmarks/memory_by_shape.py [--steps 40,120,500] [--savers durable,plainredis,postgres]

Four shapes real agents use, one checkpoint per step (a node that loops on itself):
  messages     a message list (``add_messages``) growing by one 1,500-character prose
               answer per step (a chat or ReAct thread)
  documents    a dict of documents merged one per step (5 KB of prose each: a deep
               agent's ``files`` state)
  attachments  a message list whose messages each carry a 45 KB base64 attachment
  scalar       a counter, a status and a score rewritten every step (no growth)
Each thread is measured after its last step: Redis ``MEMORY USAGE`` of every key of the
thread (durable, plainredis), or the bytes on disk of the checkpoint tables of a
database of its own (postgres; page granularity: 8 KB). The *payload* is the final
state's content (message text, document text, attachment text; for scalar, its
serialized size). Linear storage shows as flat bytes per step and a ratio to the payload
that does not grow with the steps. Loopback servers; savers with their defaults.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import redis
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.graphs import prose

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


class Messages(TypedDict):
    n: int
    messages: Annotated[list[AnyMessage], add_messages]


class Documents(TypedDict):
    n: int
    files: Annotated[dict[str, str], lambda old, new: {**old, **new}]


class Scalar(TypedDict):
    n: int
    status: str
    score: float


def _loop(state: type, step: Callable[[dict[str, Any]], dict[str, Any]], steps: int) -> Any:
    builder = StateGraph(state)
    builder.add_node("step", lambda s: {"n": s["n"] + 1, **step(s)})
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else END)
    return builder


def _attachment(n: int) -> str:
    return base64.b64encode(random.Random(n).randbytes(45 * 1024 * 3 // 4)).decode()


SHAPES: dict[str, tuple[type, Callable[[dict[str, Any]], dict[str, Any]], dict[str, Any]]] = {
    "messages": (
        Messages,
        lambda s: {"messages": [AIMessage(prose(1500, s["n"]), id=f"m{s['n']}")]},
        {"n": 0, "messages": []},
    ),
    "documents": (
        Documents,
        lambda s: {"files": {f"docs/{s['n']:04d}.md": prose(5000, s["n"])}},
        {"n": 0, "files": {}},
    ),
    "attachments": (
        Messages,
        lambda s: {"messages": [AIMessage(_attachment(s["n"]), id=f"a{s['n']}")]},
        {"n": 0, "messages": []},
    ),
    "scalar": (
        Scalar,
        lambda s: {"status": f"step {s['n']} done", "score": s["n"] / 7},
        {"n": 0, "status": "", "score": 0.0},
    ),
}


def payload(shape: str, values: dict[str, Any]) -> int:
    if shape in ("messages", "attachments"):
        return sum(len(str(m.content)) for m in values["messages"])
    if shape == "documents":
        return sum(len(text) for text in values["files"].values())
    return len(JsonPlusSerializer().dumps_typed(values)[1])


def redis_memory(client: redis.Redis, pattern: str) -> int:
    keys = set(client.scan_iter(match=pattern, count=1000))
    return sum(client.memory_usage(k, samples=0) or 0 for k in keys)


@contextmanager
def durable(url: str) -> Iterator[tuple[Any, Callable[[str], int]]]:
    from langgraph_durable import RedisSaver

    prefix = f"lgdmem-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        yield saver, lambda thread: redis_memory(client, f"{prefix}:{{{thread}}}:*")
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)
    client.close()


@contextmanager
def plainredis(url: str) -> Iterator[tuple[Any, Callable[[str], int]]]:
    from langgraph_checkpoint_plainredis import RedisSaver

    prefix = f"lgdmemplain{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    saver = RedisSaver(url=url, prefix=prefix)
    try:
        yield saver, lambda thread: redis_memory(client, f"{prefix}:*:{thread}:*")
    finally:
        saver.close()
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
        client.close()


@contextmanager
def postgres(_: str) -> Iterator[tuple[Any, Callable[[str], int]]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    name = f"lgdmem_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"

    def on_disk(_: str) -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                "JOIN pg_namespace s ON s.oid = c.relnamespace "
                "WHERE s.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'checkpoint%'"
            ).fetchone()
        return int(row[0] or 0)

    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            empty = on_disk("")
            yield saver, lambda thread: on_disk(thread) - empty
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


OPENERS = {"durable": durable, "plainredis": plainredis, "postgres": postgres}


def measure(saver_name: str, url: str, shape: str, steps: int) -> dict[str, Any]:
    state, step, start = SHAPES[shape]
    with OPENERS[saver_name](url) as (saver, stored):
        graph = _loop(state, step, steps).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": f"{shape}-{steps}"}, "recursion_limit": steps + 10}
        values = graph.invoke(dict(start), config)
        size = stored(f"{shape}-{steps}")
    final = payload(shape, values)
    return {
        "saver": saver_name,
        "shape": shape,
        "steps": steps,
        "stored_bytes": size,
        "payload_bytes": final,
        "per_step_bytes": round(size / steps),
        "vs_payload": round(size / final, 2) if shape != "scalar" else None,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", default="40,120,500")
    parser.add_argument("--savers", default="durable,plainredis,postgres")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379")
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes.split(","):
        for steps in (int(s) for s in args.steps.split(",")):
            for saver_name in args.savers.split(","):
                try:
                    row = measure(saver_name, args.redis_url, shape, steps)
                except ImportError as exc:
                    print(f"skipped {saver_name}: {exc}", file=sys.stderr)
                    continue
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    return rows


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
