"""What a saver remembers of the last checkpoints it wrote or read: the guess of a list page.

Owns the blob fields (the value hash fields, ``keys.py``) of the newest ``RECENT``
checkpoints per thread and namespace this saver wrote or read, so that a ``list`` page
or a ``get_tuple`` of a checkpoint id reads their values in the same round trip as the
records. A guess only continues what the saver saw: a page from the top when the newest
checkpoint it remembers is the newest it knows of (``newest.py``), or a page below a
checkpoint it remembers. A wrong guess (another writer moved the thread on) fetches
values no checkpoint needs and costs the round trip it would have saved, never a wrong
result. Bounded in threads, namespaces per thread (subgraph namespaces are new on every
call), checkpoints per namespace, channels per checkpoint and bytes in all (emptied
whole when over: crude, but safe from any thread).
"""

from __future__ import annotations

from collections.abc import Sequence

RECENT = 32  # checkpoints remembered per (thread, namespace): a list page
_THREADS = 256
_NAMESPACES = 16  # per thread, the last used (and the root namespace, never evicted)
_FIELDS = 256  # a checkpoint naming more channels is not remembered (a forged record)
_BYTES = 8 << 20  # of field text in all (approximate under concurrent use)


def _size(checkpoint_id: str, fields: Sequence[str]) -> int:
    return len(checkpoint_id) + sum(map(len, fields))


class _Window:
    """The newest checkpoints of one namespace: id -> blob fields. Once it is full, an
    id older than ``floor`` (its oldest after the last trim) is not added, so it stays
    the newest ids seen, never the tail of a walk through older pages."""

    __slots__ = ("floor", "ids")

    def __init__(self) -> None:
        self.floor = ""
        self.ids: dict[str, tuple[str, ...]] = {}

    def size(self) -> int:
        return sum(_size(cid, fields) for cid, fields in list(self.ids.items()))


class RecentFields:
    """Per thread and namespace, the blob fields of the newest checkpoints seen."""

    def __init__(self) -> None:
        self._threads: dict[str, dict[str, _Window]] = {}
        self._bytes = 0

    def recall(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, fields: Sequence[str]
    ) -> None:
        """Remember the blob fields of a checkpoint this saver wrote or read whole."""
        if len(fields) > _FIELDS:
            return
        size = _size(checkpoint_id, fields)
        by_ns = self._threads.get(thread_id)
        if by_ns is None or self._bytes + size > _BYTES:
            if len(self._threads) >= _THREADS or self._bytes + size > _BYTES:
                self._threads, self._bytes = {}, 0
            by_ns = self._threads.setdefault(thread_id, {})
        window = by_ns.pop(checkpoint_ns, None)  # put back last: namespaces by last use
        if window is None:
            window = _Window()
            stale = [ns for ns in list(by_ns) if ns != ""]
            for ns in stale[: max(0, len(by_ns) - _NAMESPACES + 1)]:
                evicted = by_ns.pop(ns, None)
                self._bytes -= evicted.size() if evicted is not None else 0
        by_ns[checkpoint_ns] = window
        ids = window.ids
        if checkpoint_id in ids or (len(ids) >= RECENT and checkpoint_id < window.floor):
            return  # known (fields never change under an id), or older than a full window
        ids[checkpoint_id] = tuple(fields)
        self._bytes += size
        if len(ids) > RECENT + RECENT // 2:  # amortized: back to the newest RECENT
            ordered = sorted(ids)
            for old in ordered[:-RECENT]:
                trimmed = ids.pop(old, None)
                self._bytes -= _size(old, trimmed) if trimmed is not None else 0
            window.floor = ordered[-RECENT]

    def fields(
        self,
        thread_id: str,
        checkpoint_ns: str | None,
        *,
        below: str | None = None,
        newest: str | None = None,
        count: int = RECENT,
    ) -> list[str]:
        """The guess of a ``list`` page of a namespace (every namespace for None): the
        blob fields of the ``count`` newest remembered checkpoints below ``below``, if it
        is one remembered, or from the top if the newest remembered is ``newest`` (the
        newest this saver knows of); else none."""
        windows = [
            w
            for ns, w in list(self._threads.get(thread_id, {}).items())
            if checkpoint_ns is None or ns == checkpoint_ns
        ]
        candidates = [
            (cid, fields)
            for w in windows
            for cid, fields in list(w.ids.items())
            if below is None or cid < below
        ]
        if not candidates:
            return []
        candidates.sort(reverse=True)  # newest id first: the order list walks
        known = (
            any(below in w.ids for w in windows)
            if below is not None
            else candidates[0][0] == newest
        )
        if not known:
            return []
        return sorted({f for _, fields in candidates[:count] for f in fields})

    def of(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> list[str]:
        """The blob fields of one remembered checkpoint (a read by id), or none."""
        window = self._threads.get(thread_id, {}).get(checkpoint_ns)
        fields = window.ids.get(checkpoint_id) if window is not None else None
        return list(fields or ())

    def forget(self, thread_id: str) -> None:
        by_ns = self._threads.pop(thread_id, None)
        self._bytes -= sum(w.size() for w in list(by_ns.values())) if by_ns else 0
