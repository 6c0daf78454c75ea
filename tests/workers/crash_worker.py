"""A worker that writes checkpoints as fast as it can until it is killed (test helper).

    python -m tests.workers.crash_worker URL PREFIX THREAD
Each checkpoint's value carries its step, so a reader can tell a torn write apart. It
prints "ready" once its first checkpoint and writes are stored: it has made progress.
"""

from __future__ import annotations

import sys

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import RedisSaver


def main(url: str, prefix: str, thread_id: str) -> None:
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        step = latest.metadata["step"] + 1 if latest else 0
        config = (
            latest.config
            if latest
            else {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        )
        version = latest.checkpoint["channel_versions"]["body"] if latest else None
        first = step
        while True:
            version = saver.get_next_version(version, None)
            cp = empty_checkpoint()
            cp["channel_values"] = {"body": {"step": step, "blob": f"{step}:" * 20_000}}
            cp["channel_versions"] = {"body": version}
            config = saver.put(config, cp, {"source": "loop", "step": step}, {"body": version})
            saver.put_writes(config, [("body", step), ("other", "x" * 5_000)], task_id=f"t{step}")
            if step == first:  # one whole checkpoint written: the test may kill from now
                print("ready", flush=True)
            step += 1


if __name__ == "__main__":
    main(*sys.argv[1:4])
