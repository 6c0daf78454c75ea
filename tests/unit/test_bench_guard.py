"""The benchmark's superstep guard: its figure is the trios' (runs back to back), not the
table's (medians of rounds with every other saver run in between), and the verdict reads
it."""

from __future__ import annotations

import pytest

from benchmarks.report import targets
from benchmarks.workloads.a_graph import trio_figures


def test_the_guards_figure_is_the_ratio_of_the_trios_medians() -> None:
    none = [500.0, 520.0, 900.0]  # one slow trio: the medians keep it out
    floor = [1500.0, 1520.0, 2900.0]
    ours = [1600.0, 1620.0, 2100.0]
    figures = trio_figures(none, floor, ours)
    assert figures["ratio"] == pytest.approx((1620 - 520) / (1520 - 520))
    assert (figures["none_us"], figures["floor_us"], figures["ours_us"]) == (520, 1520, 1620)
    assert figures["trios"] == 3
    low, _, high = figures["trio_quartiles"]
    assert low < 1.0 < high  # the slow trio's own ratio (0.6) is in the spread, not the figure


def test_no_ratio_when_the_floor_costs_nothing_measurable() -> None:
    figures = trio_figures([900.0, 900.0], [880.0, 900.0], [1000.0, 1000.0])
    assert figures["ratio"] is None
    assert figures["trio_quartiles"] is None  # no trio with a floor above the baseline


def test_the_verdict_reads_the_guards_figure_not_the_tables() -> None:
    row = {"overhead_vs_redis_floor": 1.10, "table_overhead_vs_redis_floor": 1.40}
    results = {"config": {"savers": ["memory", "durable"]}, "graph": {"savers": {"durable": row}}}
    (guard,) = [t for t in targets(results) if "superstep overhead" in t["target"]]
    assert guard["value"] == 1.10 and guard["pass"]
    row["overhead_vs_redis_floor"] = 1.30
    (guard,) = [t for t in targets(results) if "superstep overhead" in t["target"]]
    assert not guard["pass"]
