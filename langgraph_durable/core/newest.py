"""What a saver remembers of the newest checkpoint of each thread and namespace.

Owns the guess every read and write of a known thread starts from: the channel versions
of the newest checkpoint this saver wrote or read, and the element digests its
manifests name (``elements.py``). ``get_tuple`` reads those values and elements in the
same round trip as the checkpoint (a wrong guess costs a second round trip, never a
wrong result); ``put`` leaves out the elements its parent's manifests name. Bounded
(emptied whole when full); safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from langgraph_durable.core.manifests import named_by

WRITTEN_KEPT = 8  # checkpoints per (thread, namespace) whose written elements are kept


@dataclass
class Newest:
    """The newest checkpoint of a (thread, namespace) this saver wrote or read."""

    checkpoint_id: str
    versions: dict[str, Any]
    manifests: dict[str, tuple[bytes, ...]]  # channel -> digests of its elements (and blocks)
    checked_from: int = 0  # where the next put's window of element checks starts (writes.py)
    check_all: bool = False  # the quarantine held something at its put: check every element

    @cached_property
    def digests(self) -> frozenset[bytes]:
        """Every element its manifests name."""
        return frozenset(named_by(self.manifests.values()))


class NewestVersions:
    """Per (thread, namespace): the channel versions of the newest checkpoint this saver
    wrote or read, and the elements its manifests name. ``get_tuple`` reads those values
    and elements in the same round trip as the checkpoint (a wrong guess costs only a
    second round trip for the missing ones); ``put`` leaves out the elements its parent
    names (elements.py)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._threads: dict[str, dict[str, Newest]] = {}
        # (thread, namespace) -> checkpoint id -> elements put_writes stored for its
        # tasks' writes: the put of its child names them without sending them again
        # (writes.py). LangGraph may store a task's writes before or after its
        # checkpoint (durability "async"), so they are kept by checkpoint id.
        self._written: dict[tuple[str, str], dict[str, frozenset[bytes]]] = {}

    def entry(self, key: tuple[str, str]) -> Newest | None:
        return self._threads.get(key[0], {}).get(key[1])

    def newest_id(self, thread_id: str, checkpoint_ns: str | None) -> str | None:
        """The id of the newest checkpoint remembered in a namespace (of every namespace
        for None)."""
        entries = list(self._threads.get(thread_id, {}).items())
        return max(
            (n.checkpoint_id for ns, n in entries if checkpoint_ns in (None, ns)), default=None
        )

    def elements(self, thread_id: str) -> frozenset[bytes]:
        """Every element digest remembered for the thread (any namespace)."""
        entries = list(self._threads.get(thread_id, {}).values())
        if len(entries) == 1:
            return entries[0].digests
        return frozenset().union(*(newest.digests for newest in entries))

    def remember(
        self,
        key: tuple[str, str],
        versions: Mapping[str, Any],
        checkpoint_id: str = "",
        manifests: Mapping[str, tuple[bytes, ...]] | None = None,
        checked_from: int = 0,
        check_all: bool = False,
    ) -> None:
        known = self.entry(key)
        if (
            checkpoint_id
            and known is not None
            and known.checkpoint_id == checkpoint_id
            and known.manifests == (manifests or {})
        ):
            return  # read again as remembered: keep the entry (and its digests, computed)
        if len(self._threads) >= self._size:
            self._threads.clear()  # crude, but safe from any thread
        # A copy: the caller's dict may change.
        newest = Newest(
            checkpoint_id, dict(versions), dict(manifests or {}), checked_from, check_all
        )
        self._threads.setdefault(key[0], {})[key[1]] = newest

    def wrote(self, key: tuple[str, str], checkpoint_id: str, digests: Iterable[bytes]) -> None:
        """``put_writes`` stored ``digests`` for the writes of ``checkpoint_id``."""
        if len(self._written) >= self._size:
            self._written.clear()
        by_checkpoint = self._written.setdefault(key, {})
        if len(by_checkpoint) >= WRITTEN_KEPT and checkpoint_id not in by_checkpoint:
            by_checkpoint.clear()  # only the newest few are ever asked for
        by_checkpoint[checkpoint_id] = by_checkpoint.get(checkpoint_id, frozenset()).union(digests)

    def written(self, key: tuple[str, str], checkpoint_id: str) -> frozenset[bytes]:
        """The elements ``put_writes`` stored for the writes of ``checkpoint_id``."""
        return self._written.get(key, {}).get(checkpoint_id, frozenset())

    def forget(self, thread_id: str) -> None:
        self._threads.pop(thread_id, None)
        for key in [k for k in self._written if k[0] == thread_id]:
            self._written.pop(key, None)
