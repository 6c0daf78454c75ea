"""(b) Micro: put, put_writes, get_tuple(latest), list(limit=10) on a ~150 KB thread."""

from __future__ import annotations

from typing import Any

from benchmarks.harness import (
    MICRO_FIGURES,
    MICRO_MESSAGES,
    PAYLOAD,
    Bench,
    fu,
    fx,
    label,
    md_table,
    section,
)
from benchmarks.workloads.shared import (
    ThreadState,
    fill_thread,
    floor_key,
    make_messages,
    micro_rounds,
)


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


def render_micro(mi: dict[str, Any]) -> list[str]:
    rows = [
        [
            label(k),
            *(
                f"{fu(v[f + '_us'])} / {fu(v.get(f + '_p99_us'))} ({fx(v[f + '_ratio'])})"
                for f in MICRO_FIGURES
            ),
        ]
        for k, v in mi["savers"].items()
    ]
    return section(
        f"(b) micro: {mi['messages']}-message thread (~{mi['messages'] * PAYLOAD // 1000} KB), "
        f"p50 / p99 of {mi['rounds']} rounds, µs (p50 × InMemorySaver's)",
        f"Each round: put (only a small `counter` channel changed), put_writes (2 writes), "
        f"get_tuple(latest), list(limit=10). The thread starts with {mi['history']} "
        "checkpoints; the savers take turns every round.",
        "",
        md_table(["saver", *MICRO_FIGURES], rows),
    )
