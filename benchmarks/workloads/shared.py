"""What several workloads share: message payloads, the micro thread and its rounds, and
the Redis floor reference saver (InMemorySaver plus the one round trip a durable write needs)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.harness import (
    MICRO_FIGURES,
    PAYLOAD,
    Bench,
    Handle,
    K,
    Step,
    median_us,
    p99_us,
    run_steps,
)
from tests.helpers import graphs


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
    """One round of (b): put one changed channel, put_writes, get_tuple latest, list 10 in
    the root namespace and in every namespace."""
    cp, md, nv = st.next_checkpoint(h.saver)
    writes = [("messages", st.messages[-1]), ("counter", i)]
    return [
        ("put", lambda c: h.put(st.config, cp, md, nv)),
        ("put_writes", lambda c: h.put_writes(c["put"], writes, f"task-{i}")),
        ("get_tuple", lambda c: h.get_tuple(st.latest)),
        ("list10", lambda c: h.list(st.latest, limit=10)),
        # what LangGraph Server's history calls: no checkpoint_ns, every namespace
        (
            "list10_any_ns",
            lambda c: h.list({"configurable": {"thread_id": st.thread_id}}, limit=10),
        ),
    ]


def micro_rounds(
    b: Bench, threads: dict[K, tuple[Handle, ThreadState]], rounds: int
) -> dict[K, dict[str, float]]:
    """Median µs per figure per thread (and its 99th percentile, as ``<figure>_p99``); the
    threads take turns every round, in a rotating order, so drift on a shared machine
    hits all of them alike."""
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
    return {
        k: {
            **{f: median_us(v) for f, v in figs.items()},
            **{f"{f}_p99": p99_us(v) for f, v in figs.items()},
        }
        for k, figs in samples.items()
    }


def floor_key(h: Handle) -> str:
    return "memory-async" if h.mode == "async" else "memory"


class _FloorWrites(InMemorySaver):
    """What both floors write: the bytes InMemorySaver just serialized (no second
    dumps), queued on a pipeline."""

    prefix: str

    def _key(self, config: RunnableConfig, kind: str) -> str:
        return f"{self.prefix}:{{{config['configurable']['thread_id']}}}:{kind}"

    def _queue_put(
        self, pipe: Any, config: RunnableConfig, out: Any, checkpoint: Any, new_versions: Any
    ) -> None:
        thread_id, ns = out["configurable"]["thread_id"], out["configurable"]["checkpoint_ns"]
        stored, meta, _ = self.storage[thread_id][ns][checkpoint["id"]]
        pipe.hset(self._key(config, "cp"), checkpoint["id"], stored[1] + meta[1])
        for channel, version in new_versions.items():
            value = self.blobs[(thread_id, ns, channel, version)][1]
            pipe.hset(self._key(config, "bl"), f"{channel}:{version}", value)
        pipe.zadd(self._key(config, "cps"), {checkpoint["id"]: 0})

    def _queue_writes(self, pipe: Any, config: RunnableConfig, task_id: str) -> None:
        conf = config["configurable"]
        stored = self.writes[
            (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        ]
        for (task, idx), (_, _, value, _) in stored.items():
            if task == task_id:
                pipe.hset(
                    self._key(config, "wr"), f"{conf['checkpoint_id']}:{task}:{idx}", value[1]
                )


class RedisFloorSaver(_FloorWrites):
    """Not a checkpointer anyone should use: InMemorySaver plus the least any Redis
    checkpointer must do on the same calls, i.e. write the serialized new data of each
    put and put_writes with one pipelined round trip (no index, no integrity, no
    fencing). Its overhead in (a) is what a Redis saver costs on this machine before
    doing anything a checkpointer needs; ours is measured against it too."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        super().__init__()
        self.client, self.prefix = client, prefix

    def put(self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = super().put(config, checkpoint, metadata, new_versions)
        pipe = self.client.pipeline(transaction=False)
        self._queue_put(pipe, config, out, checkpoint, new_versions)
        pipe.execute()
        return out

    def put_writes(
        self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        super().put_writes(config, writes, task_id, task_path)
        pipe = self.client.pipeline(transaction=False)
        self._queue_writes(pipe, config, task_id)
        pipe.execute()


class AsyncRedisFloorSaver(_FloorWrites):
    """``RedisFloorSaver`` through the async API: InMemorySaver's ``aput`` and
    ``aput_writes`` (which run its sync ones) plus the same one pipelined round trip,
    on an asyncio client. What an async Redis saver is compared with: the async API
    costs a superstep more than the sync one before any saver does anything."""

    def __init__(self, client: redis.asyncio.Redis, prefix: str) -> None:
        super().__init__()
        self.client, self.prefix = client, prefix

    async def aput(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> Any:
        out = self.put(config, checkpoint, metadata, new_versions)
        pipe = self.client.pipeline(transaction=False)
        self._queue_put(pipe, config, out, checkpoint, new_versions)
        await pipe.execute()
        return out

    async def aput_writes(
        self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)
        pipe = self.client.pipeline(transaction=False)
        self._queue_writes(pipe, config, task_id)
        await pipe.execute()


REDIS_FLOOR_LABEL = "Redis floor (reference, not a saver)"
ASYNC_REDIS_FLOOR_LABEL = "Redis floor, async API (reference, not a saver)"


def invoke_react(h: Handle, graph: Any, config: RunnableConfig, ctx: dict[str, Any]) -> Any:
    return h.invoke(graph, graphs.react_input(), config)
