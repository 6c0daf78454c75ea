"""The report: the machine, the targets (ratios from the same run), and RESULTS.md."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import time
from collections.abc import Callable
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from benchmarks.harness import (
    GET_TUPLE_GUARD,
    MICRO_FIGURES,
    OVERHEAD_GUARD,
    REDIS_FAMILIES,
    ROOT,
    SAVERS,
    Bench,
    label,
    md_table,
    median_us,
    section,
    server_version,
)
from benchmarks.workloads.a_graph import render_graph
from benchmarks.workloads.b_micro import render_micro
from benchmarks.workloads.c_length import render_length
from benchmarks.workloads.d_floor import render_floor
from benchmarks.workloads.e_async import render_async
from benchmarks.workloads.f_storage import render_storage
from benchmarks.workloads.g_recovery import render_recovery


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
            # issue 32: a guard above this machine's noise (the aim stays 1.05x) against the
            # floor (InMemorySaver + the one round trip a write needs)
            check(
                f"{label} superstep overhead vs the Redis floor, same API (aim 1.05×)",
                g.get("overhead_vs_redis_floor"),
                OVERHEAD_GUARD,
            )
            # issue 44: at most what checkpoint-plainredis (no fencing, no integrity)
            # costs Redis in the same run, through the same API (the aim: the floor)
            rival = r["graph"]["savers"].get(
                "plainredis" if key == "durable" else "plainredis-async"
            )
            if rival and g.get("redis_cpu_us") and rival.get("redis_cpu_us"):
                check(
                    f"{label} Redis server CPU per superstep vs checkpoint-plainredis "
                    "(aim: the floor)",
                    g["redis_cpu_us"] / rival["redis_cpu_us"],
                    1.0,
                )
            check(
                f"{label} Redis memory of a finished prose ReAct thread vs its text",
                g.get("prose_memory_vs_text"),
                3.0,
            )
        m = r.get("micro", {}).get("savers", {}).get(key)
        if m:  # get_tuple is guarded against its floor (d), issue 44
            check(f"{label} list10 vs InMemorySaver", m["list10_ratio"], 1.1)
            if "list10_any_ns_ratio" in m:
                check(
                    f"{label} list10 without a namespace vs InMemorySaver",
                    m["list10_any_ns_ratio"],
                    1.2,
                )
        growth = r.get("length", {}).get("savers", {}).get(key, {}).get("growth")
        if growth:
            for f in MICRO_FIGURES:
                check(
                    f"{label} {f}: {growth['to']:,}-cp vs {growth['from']:,}-cp thread",
                    growth[f],
                    1.2,
                )
    fl = r.get("floor", {})
    # put vs its floor: retired (issue 32). A put through the atomic write script (fenced,
    # verified, indexed) cannot reach a floor of unfenced plain writes; (d) still shows it.
    if "get_tuple_ratio" in fl:
        check(
            "RedisSaver get_tuple vs floor (the newest checkpoint read by its known key + "
            "deserialized)",
            fl["get_tuple_ratio"],
            GET_TUPLE_GUARD,
        )
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


def overloaded(r: dict[str, Any]) -> str | None:
    """Why this run gives no verdict: a load average (1 min, at its start or end) above
    the machine's cores means other work shared them, and the ratios say little."""
    cores = r["machine"]["cores"] or 1
    start = r["machine"]["load_average_at_start"][0]
    end = r.get("load_average_at_end", [0.0])[0]
    worst = max(start, end)
    if worst > cores:
        return (
            f"no verdict: the load average was {worst:.2f} (start {start:.2f}, end "
            f"{end:.2f}), above this machine's {cores} cores; the figures are printed, "
            "run again on a quiet machine for a verdict"
        )
    return None


def render_targets(r: dict[str, Any]) -> list[str]:
    def unit(t: dict[str, Any], v: float) -> str:
        return f"{v:.2f}×" if t["unit"] == "x" else f"{v:.2f} s"

    refused = overloaded(r)
    rows = [
        [
            t["target"],
            unit(t, t["value"]),
            f"{t['op']} {unit(t, t['limit'])}",
            "—" if refused else "PASS" if t["pass"] else "**MISS**",
        ]
        for t in r.get("targets", [])
    ]
    head = [f"**{refused}.**", ""] if refused else []
    return section(
        "Targets (langgraph-durable)", *head, md_table(["target", "value", "limit", ""], rows)
    )


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
