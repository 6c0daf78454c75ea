"""What the integrity envelope costs: put and get_tuple(latest) of a 150 KB state, with
the real envelope (xxh3-128, and HMAC-SHA256) against one that skips hashing, in one run.

    python benchmarks/integrity_cost.py            # embedded Redis, or REDIS_URL
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import RedisSaver
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.tools.embedded import resolve_url


class NoHashEnvelope(Envelope):
    """The same framing without computing or checking a digest: the floor."""

    def seal(self, identity: bytes, body: bytes) -> bytes:
        return b"LD\x01\x01" + bytes(16) + body

    def open(self, identity: bytes, record: bytes | None) -> bytes:
        assert record is not None
        return record[20:]


def state(kb: int) -> dict:
    n = kb * 1000 // 1500
    return {
        "messages": [
            (HumanMessage if i % 2 else AIMessage)(content="x" * 1400, id=str(i)) for i in range(n)
        ]
    }


def measure(saver: RedisSaver, envelopes: dict[str, Envelope], values: dict, rounds: int) -> dict:
    """Medians per envelope; the envelopes take turns every round so drift hits all alike."""
    timings: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in envelopes}
    threads = {n: f"bench-{uuid.uuid4().hex[:8]}" for n in envelopes}
    configs = {
        n: {"configurable": {"thread_id": t, "checkpoint_ns": ""}} for n, t in threads.items()
    }
    version = None
    for _ in range(rounds):
        version = saver.get_next_version(version, None)
        for name, envelope in envelopes.items():
            saver.core.envelope = envelope
            cp = empty_checkpoint()
            cp["channel_values"] = values
            cp["channel_versions"] = {"messages": version}
            t0 = time.perf_counter()
            configs[name] = saver.put(
                configs[name], cp, {"source": "loop", "step": 0}, {"messages": version}
            )
            t1 = time.perf_counter()
            saver.get_tuple({"configurable": {"thread_id": threads[name], "checkpoint_ns": ""}})
            t2 = time.perf_counter()
            timings[name][0].append(t1 - t0)
            timings[name][1].append(t2 - t1)
    for name, thread in threads.items():
        saver.delete_thread(thread)
    return {
        n: (statistics.median(p) * 1e6, statistics.median(g) * 1e6) for n, (p, g) in timings.items()
    }


def main() -> None:
    url = resolve_url(None)
    values = state(150)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    prefix = f"lgdbench-{uuid.uuid4().hex[:6]}"
    envelopes = {
        "no hashing": NoHashEnvelope(),
        "xxh3-128": Envelope(),
        "hmac-sha256": Envelope(b"k" * 32),
    }
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        measure(saver, envelopes, values, 10)  # warm-up
        results = measure(saver, envelopes, values, rounds)
    base_put, base_get = results["no hashing"]
    print(f"150 KB state, {rounds} rounds, medians (µs):")
    for name, (put, get) in results.items():
        print(
            f"  {name:12s} put {put:8.0f} ({put / base_put - 1:+.1%})   get_tuple {get:8.0f} ({get / base_get - 1:+.1%})"
        )
    print(
        json.dumps({k: {"put_us": round(v[0]), "get_us": round(v[1])} for k, v in results.items()})
    )


if __name__ == "__main__":
    main()
