"""Blocked manifests (``lgdb1``, blocks.py), without a server: a long list or dict
names full blocks of 64 entries plus a tail, each block an element verified by its
digest; expanding the blocks gives back exactly the digests (and keys) split; anything
malformed, of another type or of the wrong length is damage, never a shorter value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core import blocks, elements, manifests
from langgraph_durable.core import values as values_plans
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.elements import ElementCache
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.manifests import BLOCK_ENTRIES, BLOCKED_MARK, blocked_in, expanded
from tests.unit.scripted import drive, make_core

SERDE = JsonPlusSerializer()


def split(value: Any, cache: ElementCache, key: bytes = b"") -> manifests.Split:
    made, _ = elements.split(
        SERDE,
        Compression("zstd", min_bytes=64),
        value,
        cache,
        thread_id="t",
        what="a test value",
        limit=1 << 24,
        keys=(key,) if key else (),
    )
    assert made is not None
    return blocks.with_blocks(made, cache, key)


def reopen(made: manifests.Split, key: bytes = b"") -> tuple[bytes, ...]:
    """What a reader finds: the manifest parsed, each block verified from ``stored``."""
    if made.mark != BLOCKED_MARK:
        return manifests.digests_in(made.mark, made.manifest)
    blocked = blocked_in(made.manifest)
    opened = [elements.unpack(d, made.stored[d], (key,) if key else ()) for d in blocked.blocks]
    return expanded(blocked, opened)


def document(i: int) -> str:
    return f"document {i} " * 8


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=2, max_value=300), st.booleans(), st.booleans())
def test_blocks_expand_to_exactly_what_was_split(n: int, mapping: bool, keyed: bool) -> None:
    key = b"k" * 32 if keyed else b""
    value: Any = (
        {f"k{i}": document(i) for i in range(n)} if mapping else [document(i) for i in range(n)]
    )
    made = split(value, ElementCache(), key)
    assert len(made.blocks) == n // BLOCK_ENTRIES
    assert (made.mark == BLOCKED_MARK) == (n >= BLOCK_ENTRIES)
    found = reopen(made, key)
    assert tuple(found) == made.digests
    assert getattr(found, "keys", None) == made.keys
    assert manifests.every_digest(found) == (*made.blocks, *made.digests)
    # the manifest names blocks and the tail only: 16 bytes per block, not per entry
    tail = n % BLOCK_ENTRIES
    assert len(made.manifest) <= 5 + 16 * (len(made.blocks) + tail) + (4 + 8 * tail) * mapping


def test_a_list_that_grows_keeps_its_blocks() -> None:
    cache = ElementCache()
    short = split([document(i) for i in range(130)], cache)
    long = split([document(i) for i in range(200)], cache)
    assert long.blocks[:2] == short.blocks and len(long.blocks) == 3
    edited = split(["edited", *(document(i) for i in range(1, 200))], cache)
    assert edited.blocks[0] != long.blocks[0] and edited.blocks[1:] == long.blocks[1:]


def _blocked(n_blocks: int = 2, tail: int = 3) -> tuple[manifests.Split, manifests.Blocked]:
    made = split([document(i) for i in range(n_blocks * BLOCK_ENTRIES + tail)], ElementCache())
    return made, blocked_in(made.manifest)


@pytest.mark.parametrize(
    "forged",
    [
        b"",
        b"l",
        b"x\x00\x00\x00\x01" + b"\x00" * 16,  # an unknown kind
        b"l\x00\x00\x00\x00",  # no block: never written
        b"l\x00\x00\x00\x02" + b"\x00" * 16,  # names more blocks than it holds
        b"l\x00\x00\x00\x01" + b"\x00" * 20,  # a tail that is not whole digests
        b"m\x00\x00\x00\x01" + b"\x00" * 16 + b"\x00\x00\x00\x02\xa1a",  # a broken dict tail
        "l",  # not bytes
    ],
)
def test_a_malformed_blocked_manifest_is_damage(forged: Any) -> None:
    with pytest.raises(RecordDamagedError):
        blocked_in(forged)


def test_a_block_of_another_type_or_length_is_damage_never_a_shorter_value() -> None:
    made, blocked = _blocked()
    opened = [elements.unpack(d, made.stored[d]) for d in blocked.blocks]
    assert len(expanded(blocked, opened)) == 2 * BLOCK_ENTRIES + 3
    short = (opened[0][0], opened[0][1][: -elements.DIGEST_BYTES])  # 63 entries
    with pytest.raises(RecordDamagedError, match="wrong length"):
        expanded(blocked, [short, opened[1]])
    with pytest.raises(RecordDamagedError, match="another type"):
        expanded(blocked, [(manifests.MAP_MARK, opened[0][1]), opened[1]])
    with pytest.raises(RecordDamagedError):  # an element, not a block
        expanded(blocked, [("msgpack", b"\xa3abc"), opened[1]])


def test_a_block_is_verified_against_its_digest_before_it_is_opened() -> None:
    """A block swapped for other bytes of the same length (one digest repeated) or
    missing is an ``ElementDamagedError`` naming the block; from the cache only where the
    read trusts it."""
    core = make_core()
    made, blocked = _blocked(1, 0)
    (digest,) = blocked.blocks
    stored = made.stored[digest]
    swapped = stored[:-16] + stored[-32:-16]
    for damaged in (swapped, None):
        records = elements.ValueRecords(trust_cache=False)
        records.elements[digest] = damaged
        with pytest.raises(elements.ElementDamagedError, match=digest.hex()):
            blocks.expand(core, blocked, records)
    records = elements.ValueRecords(trust_cache=False)
    records.elements[digest] = stored
    assert tuple(blocks.expand(core, blocked, records)) == made.digests
    assert tuple(blocks.expand(core, blocked, elements.ValueRecords())) == made.digests  # cached


def test_only_a_read_that_trusts_the_cache_takes_a_manifest_it_opened_before() -> None:
    """The element cache keeps what a manifest record named, by thread, field and its
    bytes; a read that must find everything in Redis (retention's, ``verify``'s) opens
    the record itself, and another thread, field or record is opened too."""
    core = make_core()
    tk = core.keys.thread("t")
    record = b"\x00 a record this process opened before (no manifest: opened, it names none)"
    known = manifests.ListDigests((b"d" * 16,))
    core.element_cache.remember_manifest(("t", "f", record), known)
    core.element_cache.add(b"d" * 16, "msgpack", b"\x01", None, None)  # nothing to read
    for trust, thread, field, taken in [
        (True, "t", "f", True),
        (False, "t", "f", False),
        (True, "t", "g", False),
        (True, "u", "f", False),
    ]:
        values = elements.ValueRecords({field: record}, trust_cache=trust)
        drive(values_plans._with_elements(core, core.keys.thread(thread), values))
        assert (values.manifests.get(field) is known) is taken, (trust, thread, field)
    changed = elements.ValueRecords({"f": record + b"!"})
    drive(values_plans._with_elements(core, tk, changed))
    assert "f" not in changed.manifests
