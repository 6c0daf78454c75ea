"""(g) Recovery: a fresh process from launch to its first resumed step; the read path
alone, with and without a damaged newest checkpoint; a profile of the durable saver."""

from __future__ import annotations

import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from benchmarks.harness import (
    MICRO_MESSAGES,
    PAYLOAD,
    ROOT,
    Bench,
    Handle,
    fu,
    fx,
    label,
    md_table,
    median_us,
    section,
)
from benchmarks.workloads.shared import ThreadState, fill_thread, make_messages
from langgraph_durable import RedisSaver
from langgraph_durable.cli.demo import damage_newest_checkpoint
from tests.helpers import graphs

#                       checkpoint would otherwise need GBs of Redis at 10,000 checkpoints
RECOVERY_CHILD = Path(__file__).resolve().parent.parent / "recovery_child.py"


def prepare_recovery_thread(h: Handle, thread: str, rounds: int, steps: int) -> None:
    """A thread stopped in the middle of a run: ``steps`` supersteps done, more to go."""
    graph = graphs.react_graph(rounds=rounds, payload=PAYLOAD).compile(checkpointer=h.saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    for i, _ in enumerate(
        graph.stream(graphs.react_input(), config, durability="sync", stream_mode="updates")
    ):
        if i + 1 >= steps:
            break


def kill_worker(kind: str, target: str, prefix: str, thread: str, rounds: int, steps: int) -> float:
    """A worker process runs ``steps`` supersteps of the thread and is SIGKILLed: when."""
    worker = subprocess.Popen(
        [sys.executable, str(RECOVERY_CHILD), kind, target, prefix, thread, str(rounds),
         str(PAYLOAD), str(steps)],
        stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
    )  # fmt: skip
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        killed = time.time()
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.kill()
        worker.wait(timeout=60)
    return killed


def run_child(
    kind: str, target: str, prefix: str, thread: str, rounds: int, killed: float | None = None
) -> dict[str, Any]:
    """Run recovery_child.py; its stage timestamps minus our launch time (and, when a
    worker was SIGKILLed on the thread, the time from the kill to the resumed step)."""
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
        **({"kill_to_step_s": s["step"] - killed} if killed is not None else {}),
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
        clean, damaged, killed = [], [], []
        for _ in range(repeats):
            thread = b.thread(h, "recover")
            prepare_recovery_thread(h, thread, rounds, steps)
            clean.append(run_child(h.family, *target, thread, rounds))
            thread = b.thread(h, "killed")
            at = kill_worker(h.family, *target, thread, rounds, steps)
            killed.append(run_child(h.family, *target, thread, rounds, killed=at))
            if h.family == "durable":
                thread = b.thread(h, "recover-dmg")
                prepare_recovery_thread(h, thread, rounds, steps)
                damage_newest_checkpoint(b.redis_url, b.prefix(h.key), thread)
                damaged.append(run_child(h.family, *target, thread, rounds))
        rows[key] = {"clean": median_dict(clean), "SIGKILLed worker": median_dict(killed)}
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
            f"{s['kill_to_step_s']:.2f}" if "kill_to_step_s" in s else "",
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
        "read falls back one checkpoint. `SIGKILLed worker`: a worker process ran the "
        "supersteps and was SIGKILLed; the fresh one starts at once, and the last column "
        "is the time from the SIGKILL to its first resumed superstep. Seconds unless marked.",
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
                "SIGKILL → next superstep",
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
