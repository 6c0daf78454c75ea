"""The ledger's scenario matrix: every way a task is reached again, crossed with every
durability mode, three agent shapes and four models, on real processes, real SIGKILLs and
an fsync'd effect record (tests/workers/matrix_runner.py runs the cells; the pieces and
the oracle are in tests/helpers/matrix.py).

Ways a task is reached again: a SIGKILL then the thread resumed (under "exit": the same
input sent again); LangGraph Server's run id kept on the retry; an interrupt answered
before the crash; the same interrupt answered otherwise after the model's answer was
journaled; an answered interrupt re-sent to its checkpoint; a fork (regenerate) from the
start; ``update_state`` on turn one's end, then run; a new message instead of a resume;
``delete_for_runs`` then a new run; ``copy_thread`` then a run on the copy; a
``RetryPolicy`` retry after the other calls' effects; two identical ``Send``s.
Oracle per cell: the run finishes; a continuation never repeats a finished effect (one
key per tool and branch; a ``retry`` tool re-run under its own key is apart); no call
gets another branch's result; nothing of a branch the human steered away from or of a
rolled-back run is executed. Questions the ledger asks are counted, never unsafe.
The table is printed (``-s``); zero unsafe cells.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DURABILITIES = ("sync", "async", "exit")
SHAPES = ("toolnode", "create_agent", "subgraph")
MODELS = ("journaled-random", "journaled-deterministic", "plain-random", "plain-deterministic")
WAYS = (
    "resume",
    "server_retry",
    "answered",
    "reanswered",
    "resend",
    "fork",
    "update_state",
    "new_input",
    "rollback",
    "copy",
    "retry_policy",
    "sends",
)
KILLED = {"resume", "server_retry", "answered", "new_input", "rollback", "copy", "sends"}


def cells() -> list[dict[str, Any]]:
    """Every cell that exists: a fork needs a saved checkpoint before the model's step
    (``exit`` saves only a run's end); create_agent has no node to put a RetryPolicy
    on; identical Sends are a graph of their own."""
    out = []
    for way in WAYS:
        for durability in DURABILITIES:
            for shape in ("sends",) if way == "sends" else SHAPES:
                for model in ("-",) if way == "sends" else MODELS:
                    if way == "fork" and durability == "exit":
                        continue
                    if way == "retry_policy" and shape == "create_agent":
                        continue
                    name = f"{way}.{durability}.{shape}.{model}"
                    cell: dict[str, Any] = {
                        "id": hashlib.sha1(name.encode()).hexdigest()[:10],
                        "way": way,
                        "durability": durability,
                        "shape": shape,
                        "model": model,
                    }
                    if way in KILLED:  # after the 1st, 2nd or 3rd of the parallel effects
                        nth = 1 if way == "sends" else 1 + int(cell["id"], 16) % 3
                        cell["kill"] = ["effect", nth]
                    elif way == "reanswered":
                        cell["kill"] = ["after_model", 1]
                    out.append(cell)
    return out


def table(results: list[dict[str, Any]]) -> str:
    """Ways down, durability across: safe cells, unsafe cells and questions asked."""
    by: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in results:
        c = by[(r["way"], r["durability"])]
        c[r["verdict"]] += 1
        asked = r.get("asked", [])
        c["unknown"] += asked.count("tool_outcome_unknown")
        c["cannot tell"] += len(asked) - asked.count("tool_outcome_unknown")
        c["cells asking"] += bool(asked)
    lines = [
        "per way and durability: safe cells, bad cells, cells that asked (questions about",
        "an unknown outcome + questions where the ledger cannot tell the execution apart)",
        f"{'way':<14}" + "".join(f"{d:>30}" for d in DURABILITIES),
    ]
    for way in WAYS:
        row = f"{way:<14}"
        for d in DURABILITIES:
            c = by.get((way, d))
            row += (
                f"{'n/a':>30}"
                if c is None
                else f"{c['safe']:>4} safe {c['unsafe'] + c['error']:>2} bad "
                f"{c['cells asking']:>3} ask ({c['unknown']:>2}+{c['cannot tell']:>2})"
            )
        lines.append(row)
    return "\n".join(lines)


def test_the_scenario_matrix_has_no_unsafe_cell(
    redis_url: str, key_prefix: str, tmp_path: Any
) -> None:
    wanted = cells()
    path = tmp_path / "cells.json"
    path.write_text(json.dumps(wanted))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.workers.matrix_runner",
            redis_url,
            key_prefix,
            str(tmp_path),
            str(path),
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [
        json.loads(line)
        for lane in tmp_path.glob("results-*.jsonl")
        for line in lane.read_text().splitlines()
    ]
    print("\n" + table(results))
    assert len(results) == len(wanted), proc.stderr[-4000:]
    bad = [r for r in results if r["verdict"] != "safe"]
    shown = "\n".join(
        f"{r['way']} {r['durability']} {r['shape']} {r['model']}: {r['why']}" for r in bad[:20]
    )
    assert not bad, f"{len(bad)} unsafe cells:\n{shown}"
