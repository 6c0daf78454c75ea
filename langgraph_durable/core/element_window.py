"""Which elements a put checks without sending them, and how.

Owns the window: the elements a checkpoint's manifests name and its put does not send
are checked by length against what this process wrote or verified, ``CHECKED_PER_PUT``
of them per put plus one for every element the put brings (sent, or stored by the
parent's pending writes: those first), each put's window starting where the one before
left off, so consecutive puts check all n within ceil(n / CHECKED_PER_PUT) even as a list
grows; all of them once the thread's quarantine holds anything; by their bytes with
``verify_elements_on_write``. See ``elements.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from langgraph_durable.core.element_cache import ElementCache
from langgraph_durable.core.manifests import every_digest

# Elements named without sending that a put checks by length.
CHECKED_PER_PUT = 8
# Up to this many elements the parent's writes stored are put in the manifests' order
# by a search each (in C); more, by one pass over every named element.
HEADS_SORTED_BY_INDEX = 8
# Known elements up to this size are checked by reading them (one HMGET for them all):
# bigger ones by HSTRLEN each, so a put reads back at most (8 + new) x 4 KB.
FETCHED_MAX = 4096


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Window:
    """A put's check of the elements it names without sending, by length: plain reads
    in the put's own round trip, ahead of its script (Redis copies a reply to the socket
    at little cost; into the script's Lua it would hash every byte, ~13 instructions a
    byte, and cost a Lua call a field). Each field with the length this process wrote
    or verified (None: it never held it, only that it is there counts)."""

    fetched: tuple[tuple[bytes, int], ...]  # known and small: read whole by one HMGET
    by_length: tuple[tuple[bytes, int | None], ...]  # HSTRLEN each (0: missing)
    rest: tuple[bytes, ...] = ()  # not checked here: only while the quarantine holds any
    watch: bool = False  # read whether the quarantine holds anything (more are named)

    def commands(self, el: str, qt: str) -> list[tuple[Any, ...]]:
        """The reads, in the order ``finding`` reads their replies."""
        reads: list[tuple[Any, ...]] = []
        if self.fetched:
            reads.append(("HMGET", el, *next(zip(*self.fetched))))  # the fields, in C
        reads.extend(("HSTRLEN", el, f) for f, _ in self.by_length)
        if self.watch:
            reads.append(("EXISTS", qt))
        return reads

    def finding(self, replies: list[Any]) -> str | None:
        """From the replies of ``commands``: "missing" or "damaged" (a length that is not
        the one this process knows) for the first element found so, "unchecked" when the
        quarantine holds anything and ``rest`` is to be checked too (``of_rest``), or
        None. A reply that is an error (a hash of the wrong type) proves nothing here:
        the put's script finds that hash itself."""
        at = 0
        if self.fetched:
            values = replies[0]
            at = 1
            if not isinstance(values, Exception) and (
                len(values) != len(self.fetched)
                or None in values
                or tuple(map(len, values)) != tuple(zip(*self.fetched))[1]
            ):  # all there and of their lengths (the usual case) told in C; else which
                for (_, length), value in zip(self.fetched, values, strict=True):
                    if value is None:
                        return "missing"
                    if len(value) != length:
                        return "damaged"
        for (_, length), stored in zip(self.by_length, replies[at:], strict=False):
            if isinstance(stored, Exception):
                continue
            if stored == 0:
                return "missing"
            if length is not None and stored != length:
                return "damaged"
        return "unchecked" if self.rest and self.quarantined(replies) else None

    def quarantined(self, replies: list[Any]) -> bool:
        """Whether the replies say the thread's quarantine holds anything: then the next
        put checks every element it names in its own round trip (``check_all``)."""
        held = replies[-1] if self.watch and replies else 0
        return bool(held) and not isinstance(held, Exception)

    def of_rest(self, cache: ElementCache) -> Window:
        """The check of ``rest``, by length, for when the quarantine holds anything."""
        return Window((), tuple(zip(self.rest, cache.lengths(self.rest))))


def unsent_window(
    manifests: Mapping[str, tuple[bytes, ...]],
    sent: list[tuple[bytes, bytes]],
    cache: ElementCache,
    by_bytes: bool,
    checked_from: int,
    first: Collection[bytes] = (),
    check_all: bool = False,
) -> tuple[bytes, Window | None, int]:
    """The elements ``manifests`` name and a put does not send, checked against what
    this process knows of their stored bytes; and where the next put's window starts.
    By bytes (``verify_elements_on_write``): all, by the put's script (ARGV 9, returned
    here; the window None). By length: a ``Window`` from ``checked_from`` (where the
    parent's put left off: ``newest.py``) of ``CHECKED_PER_PUT`` plus as many as the put
    sends, so consecutive puts check all n within ceil(n / CHECKED_PER_PUT) even as a
    list grows; the rest checked too once the thread's quarantine holds anything (a
    reader moved damage aside; with ``check_all``, the put before saw it did: then in
    this put's own round trip, by HSTRLEN). ``first``: elements the parent's pending
    writes stored (not sent, never checked by a put yet), checked first; the rotation
    moves on by as many more, as if they were sent."""
    # In C where it is O(n) (a put names every element of a growing list): only the
    # window, the elements sent and ``first`` are walked in Python.
    order = dict.fromkeys(
        chain.from_iterable(every_digest(manifests[c]) for c in sorted(manifests))
    )
    for d, _ in sent:
        order.pop(d, None)
    if not order:
        return b"", None, 0
    known_as_stored = cache.known_as_stored
    if by_bytes:
        named = list(order)
        found = [known_as_stored(d) for d in named]
        known = [k for k in found if k is not None]
        unknown = [d for d, k in zip(named, found) if k is None]
        return b"".join([b"s%d:" % len(known), *(k[1] for k in known), *unknown]), None, 0
    if len(first) < len(order):  # usually a message or two: looked up, then put in order
        heads = [d for d in set(first) if d in order]
        if len(heads) > HEADS_SORTED_BY_INDEX:  # many: one pass over the named instead
            kept = set(heads)
            heads = [d for d in order if d in kept]
        elif len(heads) > 1:  # in the order the manifests name them
            heads.sort(key=list(order).index)
    else:
        heads = [d for d in order if d in first]
    for d in heads:
        del order[d]
    others = list(order)
    start = checked_from % len(others) if others else 0
    # the rotation moves on by CHECKED_PER_PUT plus every new element, sent or not
    size = len(heads) + CHECKED_PER_PUT + len(sent) + len(heads)
    rotated = heads + others[start:] + others[:start]
    window, rest = rotated[:size], rotated[size:]
    fetched: list[tuple[bytes, int]] = []
    by_length: list[tuple[bytes, int | None]] = []
    lengths = cache.lengths(window)
    if None not in lengths and max(lengths, default=0) <= FETCHED_MAX:  # usually: in C
        fetched = list(zip(window, lengths))  # type: ignore[arg-type]
    else:
        for d, length in zip(window, lengths):
            if length is not None and length <= FETCHED_MAX:
                fetched.append((d, length))
            else:
                by_length.append((d, length))
    checked_next = start + len(window) - len(heads)
    if check_all and rest:
        by_length += zip(rest, cache.lengths(rest))
        return b"", Window(tuple(fetched), tuple(by_length), (), watch=True), checked_next
    window_ = Window(tuple(fetched), tuple(by_length), tuple(rest), watch=bool(rest))
    return b"", window_, checked_next
