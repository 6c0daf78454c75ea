"""(c) The micro figures on threads of 10, 1,000 and 10,000 checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.harness import (
    LENGTH_MESSAGES,
    MICRO_FIGURES,
    Bench,
    Handle,
    fu,
    fx,
    label,
    md_table,
    section,
)
from benchmarks.workloads.shared import ThreadState, fill_thread, make_messages, micro_rounds


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


def render_length(ln: dict[str, Any]) -> list[str]:
    rows = []
    for k, v in ln["savers"].items():
        for level, figs in sorted(v["levels"].items(), key=lambda x: int(x[0])):
            rows.append(
                [
                    label(k),
                    f"{int(level):,}",
                    *(
                        f"{fu(figs.get(f + '_us'))} / {fu(figs.get(f + '_p99_us'))}"
                        for f in MICRO_FIGURES
                    ),
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
        f"(c) thread length: micro figures (µs, p50 / p99) at {levels} checkpoints per thread",
        f"{ln['messages']}-message state; p50 / p99 of {ln['rounds']} rounds per level (they add "
        f"{ln['rounds']} checkpoints to the thread). Each level is a fresh thread filled by "
        f"puts; a saver whose fill would take over {ln['fill_budget_s']:g} s skips the level.",
        "",
        md_table(["saver", "checkpoints", *MICRO_FIGURES, "fill µs/put"], rows),
    )
