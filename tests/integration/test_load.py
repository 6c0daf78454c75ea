"""The load script at a small scale: many concurrent async threads on one Redis finish
without an error, and retention and expiry bound what they leave behind."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers.kill_harness import ROOT


def test_concurrent_threads_finish_cleanly_within_their_retention(redis_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/load.py", "--threads", "150", "--steps", "12"]
        + ["--keep-last", "4", "--ttl", "600", "--json"],
        cwd=ROOT,
        env={"REDIS_URL": redis_url, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == 0, result["first_errors"]
    # keep_last=4, collected every max(4, keep_last // 4) puts past it: at most 4 + 4 + 1.
    assert 4 <= result["max_checkpoints_per_thread"] <= 9
    assert result["keys_without_ttl"] == 0
    assert result["keys"] > 0
