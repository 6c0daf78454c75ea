"""Which elements a put checks without sending them (``put_checkpoint.lua``, ARGV 9).

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

from langgraph_durable.core.element_cache import ElementCache
from langgraph_durable.core.manifests import every_digest

# Elements named without sending that a put checks by length.
CHECKED_PER_PUT = 8
# Known elements up to this size are checked by reading them (one HMGET for them all).
FETCHED_MAX = 16384


def unsent_window(
    manifests: Mapping[str, tuple[bytes, ...]],
    sent: list[tuple[bytes, bytes]],
    cache: ElementCache,
    by_bytes: bool,
    checked_from: int,
    first: Collection[bytes] = (),
) -> tuple[bytes, int]:
    """The elements ``manifests`` name and a put does not send, for put_checkpoint.lua to
    check (ARGV 9) against what this process knows of their stored bytes, and where the
    next put's window starts. By bytes (``verify_elements_on_write``): all. By length: a
    window from ``checked_from`` (where the parent's put left off: ``newest.py``) of
    ``CHECKED_PER_PUT`` plus as many as the put sends, so consecutive puts check all n
    within ceil(n / CHECKED_PER_PUT) even as a list grows; the rest follow, checked too
    once the thread's quarantine holds anything (a reader moved damage aside). ``first``:
    elements the parent's pending writes stored (not sent, never checked by a put yet),
    checked first; the rotation moves on by as many more, as if they were sent."""
    sending = {d for d, _ in sent}
    named = [
        d
        for d in dict.fromkeys(d for c in sorted(manifests) for d in every_digest(manifests[c]))
        if d not in sending
    ]
    if not named:
        return b"", 0
    known_as_stored = cache.known_as_stored
    if by_bytes:
        found = [known_as_stored(d) for d in named]
        known = [k for k in found if k is not None]
        unknown = [d for d, k in zip(named, found) if k is None]
        return b"".join([b"s%d:" % len(known), *(k[1] for k in known), *unknown]), 0
    heads = [d for d in named if d in first]
    others = [d for d in named if d not in first] if heads else named
    start = checked_from % len(others) if others else 0
    # the rotation moves on by CHECKED_PER_PUT plus every new element, sent or not
    size = len(heads) + CHECKED_PER_PUT + len(sent) + len(heads)
    rotated = heads + others[start:] + others[:start]
    window, rest = rotated[:size], rotated[size:]
    found = [known_as_stored(d) for d in window]
    # Known small ones first: the script reads those whole in one HMGET (a command a
    # field costs ~2 µs of Redis in Lua, copying a few KB far less), the others by
    # HSTRLEN, one command each.
    known = sorted((k for k in found if k is not None), key=lambda k: k[0] > FETCHED_MAX)
    fetched = sum(1 for k in known if k[0] <= FETCHED_MAX)
    unknown = [d for d, k in zip(window, found) if k is None]
    total = sum(k[0] for k in known)
    head = b"l%d:%d:%d:%d:" % (total, len(known), len(window), fetched)
    checked_next = start + len(window) - len(heads)
    return b"".join([head, *(k[1][:16] for k in known), *unknown, *rest]), checked_next
