"""A put's split of a growing list or dict, remembered, so the next put splits only what
was appended.

Owns ``SplitMemo``. A channel that grows by appending (messages; a dict merged one
document per step) is serialized whole by every put, as LangGraph's own savers do, and
its msgpack bytes then begin with the bytes of the value the previous put split: the
entries there are the same, so their digests and stored forms are taken from here
instead of cutting, hashing and looking up each again (a put's splitting costs its new
entries, not the whole value). Msgpack is self-delimiting, so identical leading bytes are
identical leading entries; what follows is parsed as before, and must end exactly where
the value does (one entry appended, the usual superstep, is all that follows: an array
whose header counts one more entry than the memo holds). Keyed by thread, channel and
element key; in memory only, bounded (``max_bytes``, the least recently used forgotten
first); only what this process serialized and split itself goes in, nothing read from
Redis.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from langgraph_durable.core.manifests import MSGPACK, msgpack_tail


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Remembered:
    """One split: what its entries became, and their bytes (without the array or map
    header)."""

    count: int
    digests: tuple[bytes, ...]
    stored: dict[bytes, bytes]  # digest -> stored element
    keys: tuple[bytes, ...] | None  # a dict's keys, as msgpack packs them
    value_bytes: int  # the values' serialized bytes (a dict's without its keys)
    size: int  # what holding it costs, roughly
    # the element cache's fingerprints generation under which every digest here was
    # noted (-1: not all were), so the next split need not note them again
    noted: int = -1
    # set by ``SplitMemo.remember``: a view of the value serialized, not a copy of it
    body: bytes | memoryview = b""


class SplitMemo:
    """The last split of each (thread, channel, element key), at most ``max_bytes`` of
    them; safe from any thread."""

    def __init__(self, max_bytes: int = 16 << 20) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, Remembered] = OrderedDict()
        self._size = 0

    def prefix(
        self, key: Any, whole: tuple[str, bytes], count: int, mapping: bool
    ) -> tuple[Remembered, list[tuple[bytes, ...]]] | None:
        """The split remembered under ``key`` if ``whole`` (a msgpack array, or map, of
        ``count`` entries) begins with its entries, and the entries after them; else None."""
        type_, data = whole
        with self._lock:
            before = self._entries.get(key)
            if before is not None:
                self._entries.move_to_end(key)
        if before is None or type_ != MSGPACK or before.count > count:
            return None
        start = _header_length(data, mapping)
        if start is None or not data.startswith(before.body, start):
            return None
        at = start + len(before.body)
        if count == before.count + 1 and not mapping and at < len(data) and _count(data) == count:
            # One entry appended (a message a superstep adds): an array of ``count``
            # whose first count - 1 are the remembered ones holds it in all that follows.
            return before, [(data[at:],)]
        tail = msgpack_tail(
            data, start + len(before.body), count - before.count, 2 if mapping else 1
        )
        return None if tail is None else (before, tail)

    def remember(self, key: Any, whole: tuple[str, bytes], mapping: bool, made: Remembered) -> None:
        """Keep ``made``, the split of ``whole`` (a fresh one: its body is set here, cut
        from ``whole``), under ``key``."""
        start = _header_length(whole[1], mapping)
        if whole[0] != MSGPACK or start is None or made.size > self.max_bytes:
            return
        # a view: a slice would copy the whole list's bytes; a copy of anything but
        # bytes, which a serializer could change or reuse after it is remembered
        made.body = (
            memoryview(whole[1])[start:]
            if type(whole[1]) is bytes
            else bytes(memoryview(whole[1])[start:])  # one copy, not a slice's and then bytes
        )
        with self._lock:
            old = self._entries.pop(key, None)
            self._size -= old.size if old is not None else 0
            while self._entries and self._size + made.size > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._size -= dropped.size
            self._entries[key] = made
            self._size += made.size


def _count(data: bytes) -> int | None:
    """The number of entries of the msgpack array ``data`` starts with, or None."""
    first = data[0]
    if (first & 0xF0) == 0x90:
        return first & 0x0F
    if first == 0xDC:
        return int.from_bytes(data[1:3], "big")
    if first == 0xDD:
        return int.from_bytes(data[1:5], "big")
    return None


def _header_length(data: bytes, mapping: bool) -> int | None:
    """The length of the msgpack array (or map) header ``data`` starts with, or None."""
    if not data:
        return None
    first = data[0]
    if (first & 0xF0) == (0x80 if mapping else 0x90):
        return 1
    if first == (0xDE if mapping else 0xDC):
        return 3
    if first == (0xDF if mapping else 0xDD):
        return 5
    return None
