"""Blocks: a long channel value's manifest names runs of its entries, not each entry.

Owns both sides of the ``lgdb1`` manifest (its format is ``manifests.py``'s). Without
blocks, a checkpoint's manifest names every element of its list (16 bytes each), so a
thread that grows by a message per step still grows with the square of its length,
only 16 bytes at a time (5x its text after 500 ReAct steps). With them:
  * A writer (``with_blocks``) cuts a channel value's entries, from the first, into
    full blocks of ``BLOCK_ENTRIES``; each block is an ``lgdl1`` or ``lgdm1`` manifest
    stored as an element (``P:{T}:el``, under its digest, keyed like every element), so
    it is stored once and every later checkpoint of a growing list names it by 16
    bytes. The manifest names the blocks, then the tail of fewer entries.
  * A block is an element like any other: named by a sealed manifest, verified against
    its digest before it is opened, kept while a checkpoint names it (retention expands
    blocks before it counts orphans), left out of a put whose parent names it and
    checked by the put like one.
  * A reader (``expand``) opens a block only from bytes that verify, and refuses one
    that is not a manifest of its kind with exactly ``BLOCK_ENTRIES`` entries (blocks do
    not nest: one more level of reading at most).
Pending writes are never blocked: a write names the few messages a task appended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from langgraph_durable.core import elements
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ElementCache
from langgraph_durable.core.manifests import (
    BLOCK_ENTRIES,
    Blocked,
    ListDigests,
    MapDigests,
    Split,
    block_entries,
    with_tail,
)


def with_blocks(split: Split, cache: ElementCache, key: bytes) -> Split:
    """``split`` with its full blocks of ``BLOCK_ENTRIES`` entries stored as elements
    (in ``stored``), or as it is when it is shorter than one block. A block this process
    made or read before costs a dictionary lookup (``cache``)."""
    count = len(split.digests) // BLOCK_ENTRIES
    if not count:
        return split
    stored = dict(split.stored)
    blocks = []
    for start in range(0, count * BLOCK_ENTRIES, BLOCK_ENTRIES):
        data = split.entries(start, start + BLOCK_ENTRIES)
        packed = b"%s\x00%s" % (split.kind.encode(), data)
        found = cache.by_content(packed)
        if found is None:
            digest = elements.digest_of(packed, key)
            found = cache.add(digest, split.kind, data, packed, packed)  # type: ignore[assignment]
        digest, block = found
        cache.note_stored(digest, block)
        stored[digest] = block
        blocks.append(digest)
    return replace(split, stored=stored, blocks=tuple(blocks))


def expand(
    ctx: PlanContext, blocked: Blocked, values: Mapping[str, Any]
) -> ListDigests | MapDigests:
    """The digests ``blocked`` names, each block from the cache (where ``values``, a
    ``ValueRecords``, trusts it) or verified from ``values.elements`` (then cached);
    ``ElementDamagedError`` for a block missing or not the bytes its digest names,
    ``RecordDamagedError`` for one that is not a block. Blocks held in the cache are
    opened once: their entries are kept with them (``ElementCache.expansions``)."""
    found = getattr(values, "elements", {})
    held = values.cached if isinstance(values, elements.ValueRecords) else ElementCache.get
    cache = ctx.element_cache
    opened = []
    all_held = True
    for digest in blocked.blocks:
        known = held(cache, digest)
        if known is None:
            all_held = False
            stored = found.get(digest)
            known = elements.unpack(digest, stored, ctx.element_keys)
            cache.note_stored(digest, stored)  # verified: a put may check against it
            cache.add(digest, *known, None, None)
        opened.append(known)
    key = (blocked.kind, blocked.blocks)
    entries = cache.expansions.get(key) if all_held else None
    if entries is None:
        entries = block_entries(blocked.kind, opened)
        cache.remember_expansion(key, entries)
    return with_tail(blocked, entries)
