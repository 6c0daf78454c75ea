"""What a saver remembers of the newest checkpoints of each thread and namespace.

Owns the guess every read and write of a known thread starts from: the channel versions
of the newest checkpoint this saver wrote or read, and the element digests its
manifests name (``elements.py``). ``get_tuple`` reads those values and elements in the
same round trip as the checkpoint (a wrong guess costs a second round trip, never a
wrong result); ``put`` leaves out the elements its parent's manifests name. Also the
blob fields of the last checkpoints it wrote or read per namespace (``RECENT``), so a
``list`` page or a read by checkpoint id reads their values with the records. Bounded
(emptied whole when full); safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

RECENT = 32  # checkpoints whose blob fields are kept per (thread, namespace): a list page
_RECENT_THREADS = 256  # threads whose recent checkpoints are kept (a few MB at most)
_RECENT_FIELDS = 256  # a checkpoint with more channels than this is not remembered (a
# forged record's thousands of versions must not stay in memory: it costs a round trip)


@dataclass
class Newest:
    """The newest checkpoint of a (thread, namespace) this saver wrote or read."""

    checkpoint_id: str
    versions: dict[str, Any]
    manifests: dict[str, tuple[bytes, ...]]  # channel -> digests of its elements (elements.py)

    @cached_property
    def digests(self) -> frozenset[bytes]:
        """Every element its manifests name."""
        return frozenset(d for digests in self.manifests.values() for d in digests)


class _NewestVersions:
    """Per (thread, namespace): the channel versions of the newest checkpoint this saver
    wrote or read, and the elements its manifests name. ``get_tuple`` reads those values
    and elements in the same round trip as the checkpoint (a wrong guess costs only a
    second round trip for the missing ones); ``put`` leaves out the elements its parent
    names (elements.py)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._threads: dict[str, dict[str, Newest]] = {}
        # thread -> namespace -> checkpoint id -> blob fields of its channel values
        self._recent: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {}

    def entry(self, key: tuple[str, str]) -> Newest | None:
        return self._threads.get(key[0], {}).get(key[1])

    def elements(self, thread_id: str) -> list[bytes]:
        """Every element digest remembered for the thread (any namespace)."""
        return sorted(
            {
                d
                for newest in list(self._threads.get(thread_id, {}).values())
                for digests in newest.manifests.values()
                for d in digests
            }
        )

    def remember(
        self,
        key: tuple[str, str],
        versions: Mapping[str, Any],
        checkpoint_id: str = "",
        manifests: Mapping[str, tuple[bytes, ...]] | None = None,
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
        newest = Newest(checkpoint_id, dict(versions), dict(manifests or {}))
        self._threads.setdefault(key[0], {})[key[1]] = newest

    def recall(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, fields: Sequence[str]
    ) -> None:
        """Remember the blob fields of a checkpoint this saver wrote or read."""
        if len(fields) > _RECENT_FIELDS:
            return
        by_ns = self._recent.get(thread_id)
        if by_ns is None:
            if len(self._recent) >= _RECENT_THREADS:
                self._recent.clear()  # crude, but safe from any thread
            by_ns = self._recent.setdefault(thread_id, {})
        ids = by_ns.setdefault(checkpoint_ns, {})
        ids[checkpoint_id] = tuple(fields)
        if len(ids) > RECENT + RECENT // 2:  # amortized: trim to the newest RECENT
            for old in sorted(ids)[:-RECENT]:
                ids.pop(old, None)

    def fields(
        self,
        thread_id: str,
        checkpoint_ns: str | None,
        *,
        below: str | None = None,
        count: int = RECENT,
        checkpoint_id: str | None = None,
    ) -> list[str]:
        """The blob fields of the newest ``count`` remembered checkpoints of a namespace
        (every namespace for None) whose ids are below ``below``, or of the one
        ``checkpoint_id``: the guess of a ``list`` page or a read by id."""
        candidates: list[tuple[str, str, tuple[str, ...]]] = []
        for ns, ids in list(self._recent.get(thread_id, {}).items()):
            if checkpoint_ns is not None and ns != checkpoint_ns:
                continue
            if checkpoint_id is not None:
                candidates += (
                    [(checkpoint_id, ns, ids[checkpoint_id])] if checkpoint_id in ids else []
                )
                continue
            candidates += [
                (cid, ns, fields)
                for cid, fields in list(ids.items())
                if below is None or cid < below
            ]
        candidates.sort(reverse=True)  # newest id first: the order list walks
        return sorted({f for _, _, fields in candidates[:count] for f in fields})

    def forget(self, thread_id: str) -> None:
        self._threads.pop(thread_id, None)
        self._recent.pop(thread_id, None)
