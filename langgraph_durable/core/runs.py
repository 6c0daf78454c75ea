"""The run index: which threads a run wrote checkpoints to, so ``delete_for_runs`` (what
LangGraph Server calls to roll back a cancelled run) visits those threads only.

Owns the index key's upkeep and nothing else. Rules it keeps:
  * ``P:run:{R}`` is a SET of thread ids, with the run id as its own hash tag (a run may
    span threads, so it cannot live in a thread's slot). Each thread's ``runs`` hash
    still says which of its checkpoints a run wrote; the index only narrows the search.
  * A put adds its thread to its run's set in the same round trip (``Batch.ahead``), and
    only when this saver has not done so lately: once per (run, thread), again after
    half the ``ttl`` so the set outlives the thread's last write as the thread does.
  * An entry may outlive its checkpoints (pruned, deleted by run): harmless, the
    thread's ``runs`` hash decides. ``delete_thread`` takes the thread out of its runs'
    sets, so no set is kept for threads that are gone.
  * Threads written before the index existed are put into it once per key prefix, by
    the first saver's ``setup()`` that may write (``ThreadPlans.index_runs``: one SCAN),
    which then sets ``P:run-index``. From then on a run without a set wrote nothing and
    ``delete_for_runs`` has nothing to do; without the marker (a FLUSHDB, a saver that may
    not write) it SCANs for such a run, as before the index existed.
"""

from __future__ import annotations

import time
from typing import Any

from langgraph_durable.core.keys import KeySchema

_SIZE = 4096  # (run, thread) pairs remembered per saver


class RunIndex:
    """What a put adds to the run index, remembered per saver so it is sent rarely."""

    def __init__(self, keys: KeySchema, ttl: int | None) -> None:
        self.keys = keys
        self.ttl = ttl
        self._sent: dict[tuple[str, str], float] = {}  # (run, thread) -> monotonic time

    def ahead(
        self, run_id: str, thread_id: str, *, again: bool = False
    ) -> tuple[tuple[Any, ...], ...]:
        """The commands a write of ``run_id`` in ``thread_id`` sends ahead of its batch:
        none if this saver sent them lately, unless ``again`` (a copy, which writes once)."""
        if not run_id:
            return ()
        now = time.monotonic()
        sent = self._sent.get((run_id, thread_id))
        if not again and sent is not None and (not self.ttl or now - sent < self.ttl / 2):
            return ()
        if len(self._sent) >= _SIZE:
            self._sent.clear()  # crude, but safe from any thread: costs one SADD each
        self._sent[(run_id, thread_id)] = now
        key = self.keys.run(run_id)
        if self.ttl:
            return (("SADD", key, thread_id), ("EXPIRE", key, self.ttl))
        return (("SADD", key, thread_id),)

    def forget(self, thread_id: str) -> None:
        for pair in [p for p in list(self._sent) if p[1] == thread_id]:
            self._sent.pop(pair, None)
