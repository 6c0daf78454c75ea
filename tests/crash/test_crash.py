"""Crashes with real processes and SIGKILL."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from langgraph_durable import RedisSaver

ROOT = Path(__file__).resolve().parents[2]


def test_sigkill_mid_write_never_leaves_a_torn_checkpoint(redis_url: str, key_prefix: str) -> None:
    rng = random.Random(7)
    config = {"configurable": {"thread_id": "crashy", "checkpoint_ns": ""}}
    last_step = -1
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        for _ in range(8):
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.workers.crash_worker",
                    redis_url,
                    key_prefix,
                    "crashy",
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            # "ready": it stored a checkpoint, so it made progress however slow the machine
            assert worker.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0, 0.25))  # only where the kill lands: any moment will do
            worker.kill()  # SIGKILL, wherever it is
            worker.wait()
            report = saver.verify("crashy")
            assert report.ok, report.findings
            tup = saver.get_tuple(config)
            assert tup is not None
            step = tup.metadata["step"]
            body = tup.checkpoint["channel_values"]["body"]
            assert body == {"step": step, "blob": f"{step}:" * 20_000}
            assert step > last_step, "every worker made progress and none was lost"
            for task_id, channel, value in tup.pending_writes:
                assert task_id == f"t{step}" and channel in ("body", "other")
            last_step = step
        assert saver.recovery_report("crashy") is None  # nothing was ever damaged
