"""(f) Bytes stored per checkpoint against the serialized size of the new data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from typing_extensions import Self

from benchmarks.harness import (
    MICRO_MESSAGES,
    PAYLOAD,
    REDIS_FAMILIES,
    Bench,
    fu,
    fx,
    label,
    md_table,
    section,
)
from benchmarks.workloads.shared import ThreadState, fill_thread, make_messages
from langgraph_durable.core.keys import THREAD_KEY_KINDS
from tests.helpers import graphs


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
        # compile() hands the graph a copy of the saver (with its types allowlisted): tap that
        with SizeTap(graph.checkpointer) as tap:
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
