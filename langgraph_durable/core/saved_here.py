"""Checkpoints this process saved: which, where, and whether its own runs made them.

Owns a small in-process memory filled by every saver's ``put``: for each key prefix,
thread and namespace, the ids of the checkpoints this process saved as a run went on
(LangGraph's ``"loop"`` and ``"input"`` checkpoints; not ``"update"`` or ``"fork"``). The
ledger reads it (``ledger/executions.py`` rule 6): a checkpoint saved since a crashed
execution's last record tells that the execution ended or another line went on, unless
the run resuming it saved that checkpoint itself. Bounded; shared by every saver of the
process (a ledger may record through another saver than its graph's).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

_KEPT = 20_000  # checkpoint ids remembered in all
_RUN_SOURCES = ("loop", "input")

_lock = threading.Lock()
_saved: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()


def note(
    prefix: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str, source: object
) -> None:
    """Remember a checkpoint this process saved (only those a run saves as it goes on)."""
    if source not in _RUN_SOURCES:
        return
    with _lock:
        _saved[(prefix, thread_id, checkpoint_ns, checkpoint_id)] = None
        while len(_saved) > _KEPT:
            _saved.popitem(last=False)


def by_a_run_here(prefix: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
    """Whether a run of this process saved that checkpoint."""
    with _lock:
        return (prefix, thread_id, checkpoint_ns, checkpoint_id) in _saved
