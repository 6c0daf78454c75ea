"""Write checkpoints as fast as possible and print the id of each one Redis acknowledged
(test helper for the Redis restart test).

    python -m tests.workers.ack_writer URL PREFIX THREAD
"""

from __future__ import annotations

import sys

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import RedisSaver


def main(url: str, prefix: str, thread: str) -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        version = None
        for step in range(1_000_000):
            version = saver.get_next_version(version, None)
            cp = empty_checkpoint()
            cp["channel_values"] = {"step": step, "text": "x" * 2000}
            cp["channel_versions"] = {"step": version, "text": version}
            config = saver.put(config, cp, {"source": "loop", "step": step}, cp["channel_versions"])
            saver.put_writes(config, [("step", step)], task_id=f"task-{step}")
            print(config["configurable"]["checkpoint_id"], flush=True)  # acknowledged


if __name__ == "__main__":
    main(*sys.argv[1:4])
