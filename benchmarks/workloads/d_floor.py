"""(d) The floor: serialize what a put writes and write it in one pipelined round trip;
read what a get_tuple returns in one and deserialize it."""

from __future__ import annotations

import time
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from benchmarks.harness import (
    GET_TUPLE_GUARD,
    MICRO_MESSAGES,
    Bench,
    fu,
    fx,
    mark,
    md_table,
    median_us,
    section,
)
from benchmarks.integrity_cost import NoHashEnvelope
from benchmarks.integrity_cost import measure as measure_integrity
from benchmarks.workloads.shared import ThreadState, fill_thread, make_messages
from langgraph_durable import RedisSaver


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
    get_us, get_floor_us = _get_against_floor(b, saver, st, shadow.thread_id, rounds)
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
        "get_tuple_us": get_us,
        "get_tuple_floor_us": get_floor_us,
        "get_tuple_ratio": get_us / get_floor_us,
        "integrity": {
            "put_us": put,
            "put_unhashed_us": base_put,
            "put_ratio": put / base_put,
            "get_tuple_us": get,
            "get_tuple_unhashed_us": base_get,
            "get_tuple_ratio": get / base_get,
        },
    }


def _get_against_floor(
    b: Bench, saver: RedisSaver, st: ThreadState, floor_thread: str, rounds: int
) -> tuple[float, float]:
    """get_tuple(latest) against the least any Redis checkpointer must do for it: one
    round trip reading the serialized checkpoint, metadata and channel values of the
    same state (their keys known, nothing to look up), then deserializing them, as
    InMemorySaver does. They alternate; medians in µs."""
    client, serde = saver.client, JsonPlusSerializer()
    latest = saver.get_tuple(st.latest)
    assert latest is not None
    stored = {k: v for k, v in latest.checkpoint.items() if k != "channel_values"}
    parts = {
        "checkpoint": stored,
        "metadata": latest.metadata,
        **latest.checkpoint["channel_values"],
    }
    key = f"{b.prefix('floor')}:{{{floor_thread}}}:get"
    flat: dict[str, bytes] = {}
    for name, value in parts.items():
        type_, data = serde.dumps_typed(value)
        flat[f"{name}:t"], flat[f"{name}:d"] = type_.encode(), data
    client.hset(key, mapping=flat)
    fields = list(flat)

    def floor_get() -> dict[str, Any]:
        pipe = client.pipeline(transaction=False)
        pipe.hmget(key, fields)
        (values,) = pipe.execute()
        return {
            name: serde.loads_typed((values[i].decode(), values[i + 1]))
            for i, name in zip(range(0, len(values), 2), parts)
        }

    gets: list[float] = []
    floors: list[float] = []
    for i in range(rounds // 10 + rounds):
        for which in ("get", "floor") if i % 2 else ("floor", "get"):
            t0 = time.perf_counter()
            saver.get_tuple(st.latest) if which == "get" else floor_get()
            d = time.perf_counter() - t0
            if i >= rounds // 10:
                (gets if which == "get" else floors).append(d)
    return median_us(gets), median_us(floors)


def render_floor(fl: dict[str, Any]) -> list[str]:
    out = section(
        "(d) the floor",
        "Floor: `JsonPlusSerializer().dumps_typed` of what the put stores (checkpoint without "
        "values, metadata, the changed value), written with one `pipeline(transaction=False)` "
        f"round trip (2 HSET + ZADD); alternating with RedisSaver.put, median of {fl['rounds']}.",
        "",
        md_table(
            ["RedisSaver.put µs", "floor µs", "put ÷ floor", "(target retired)"],
            [[fu(fl["put_us"]), fu(fl["floor_us"]), fx(fl["ratio"]), "see the targets"]],
        ),
    )
    if "get_tuple_ratio" in fl:
        out += [
            "",
            (
                "get_tuple(latest) of the same 100-message thread against its floor: one "
                "pipelined HMGET of the serialized checkpoint, metadata and channel values "
                "(keys known, nothing looked up), then `loads_typed` of each, as "
                f"InMemorySaver does; alternating, median of {fl['rounds']}."
            ),
            "",
            md_table(
                [
                    "RedisSaver.get_tuple µs",
                    "floor µs",
                    "get_tuple ÷ floor",
                    f"target ≤{GET_TUPLE_GUARD}×",
                ],
                [
                    [fu(fl["get_tuple_us"]), fu(fl["get_tuple_floor_us"])]
                    + [fx(fl["get_tuple_ratio"]), mark(fl["get_tuple_ratio"], GET_TUPLE_GUARD)]
                ],
            ),
        ]
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
