"""The manifest formats: how a list or a dict in element form is named in its record.

Owns the manifest types and their data (``elements.py`` owns splitting values into
elements and storing them): ``lgdl1``, a list's, is its elements' digests in order;
``lgdm1``, a dict's, is its entry count (4 bytes), its keys as msgpack packs them, then
one digest per value. ``lgdb1``, a long list's or dict's (``BLOCK_ENTRIES`` entries or
more, channel values only), names *blocks*: each full run of ``BLOCK_ENTRIES`` entries
from the start is an ``lgdl1`` or ``lgdm1`` manifest stored once as an element, so a
list that grows keeps its blocks and a checkpoint's manifest names a few blocks and a
tail, not every element again (``Blocked``, ``expanded``). Reading one (``digests_in``,
``blocked_in``) never trusts it beyond its seal: anything that does not parse exactly
is ``RecordDamagedError``. A list or dict is rebuilt as the msgpack LangGraph would
have written whole (``joined``, ``joined_map``), so one call deserializes it, through
the allowlist.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import msgpack
from typing_extensions import Self

from langgraph_durable.core.errors import RecordDamagedError

DIGEST_BYTES = 16

MARK = "lgdl1"  # the serialization type of a list's manifest
MAP_MARK = "lgdm1"  # of a dict's manifest: its keys, and its values' digests
MARKS = (MARK, MAP_MARK)  # what a pending write's manifest may be
BLOCKED_MARK = "lgdb1"  # a long channel value's: blocks of entries, then its tail
VALUE_MARKS = (*MARKS, BLOCKED_MARK)  # what a channel value's manifest may be
PACKED_MARK = b"\xa5" + MARK.encode()  # how msgpack writes it inside a record's body
PACKED_MARKS = (PACKED_MARK, b"\xa5" + MAP_MARK.encode(), b"\xa5" + BLOCKED_MARK.encode())
BLOCK_ENTRIES = 64  # entries per block: 1 KB of a list's digests, named by 16 bytes
_KINDS = {MARK: b"l", MAP_MARK: b"m"}  # a blocked manifest's first byte: its blocks' type
BLOCKED_HEADER = 5  # that byte, then the count of blocks (4 bytes)


class ListDigests(tuple[bytes, ...]):
    """The digests a list's manifest names, in order, with the ``blocks`` naming them
    (a blocked manifest's; ``()`` otherwise)."""

    blocks: tuple[bytes, ...] = ()

    def __new__(cls, digests: Iterable[bytes], blocks: tuple[bytes, ...] = ()) -> Self:
        made = super().__new__(cls, digests)
        made.blocks = blocks
        return made


class MapDigests(tuple[bytes, ...]):
    """The digests a dict's manifest names, in its order, with its ``keys`` (each as
    msgpack packs it) and the ``blocks`` naming them: what every reader of digests reads,
    and what rebuilds the dict."""

    keys: tuple[bytes, ...]
    blocks: tuple[bytes, ...] = ()

    def __new__(
        cls, digests: Iterable[bytes], keys: tuple[bytes, ...], blocks: tuple[bytes, ...] = ()
    ) -> Self:
        made = super().__new__(cls, digests)
        made.keys = keys
        made.blocks = blocks
        return made


def every_digest(digests: Sequence[bytes]) -> tuple[bytes, ...]:
    """Every element a manifest's digests stand for: its entries' and its blocks'
    (what retention keeps, a put checks and a reader reads)."""
    return (*getattr(digests, "blocks", ()), *digests)  # blocks first: a list grows at its end


def named_by(manifests: Iterable[Sequence[bytes]]) -> set[bytes]:
    """Every element the digests of ``manifests`` stand for (``every_digest``), once."""
    named: set[bytes] = set()
    for digests in manifests:
        named.update(digests, getattr(digests, "blocks", ()))
    return named


class Blocked:
    """A blocked manifest (``lgdb1``) opened but not expanded: the type of its blocks
    (``MARK`` or ``MAP_MARK``), their digests, and its tail (the entries after them)."""

    def __init__(self, kind: str, blocks: tuple[bytes, ...], tail: tuple[bytes, ...]) -> None:
        self.kind, self.blocks, self.tail = kind, blocks, tail

    def __iter__(self) -> Iterator[bytes]:  # what it names before it is expanded
        return iter((*self.blocks, *self.tail))


def blocked_manifest(kind: str, blocks: Sequence[bytes], tail: bytes) -> bytes:
    """The data of an ``lgdb1`` manifest: its blocks' type (1 byte), their count (4
    bytes), their digests, then its tail as a ``kind`` manifest (``b""``: none)."""
    return b"".join((_KINDS[kind], len(blocks).to_bytes(4, "big"), *blocks, tail))


def blocked_tail_at(blocks: int) -> int:
    """Where the tail of a blocked manifest naming ``blocks`` blocks starts."""
    return BLOCKED_HEADER + blocks * DIGEST_BYTES


def blocked_in(manifest: Any) -> Blocked:
    """A verified ``lgdb1`` manifest's data opened; ``RecordDamagedError`` if it is not
    one (no blocks, an unknown kind, a tail that does not parse exactly)."""
    if not isinstance(manifest, bytes) or len(manifest) < BLOCKED_HEADER:
        raise RecordDamagedError("undecodable body (not a manifest)")
    kind = next((mark for mark, byte in _KINDS.items() if byte == manifest[:1]), None)
    count = int.from_bytes(manifest[1:BLOCKED_HEADER], "big")
    end = blocked_tail_at(count)
    if kind is None or count == 0 or end > len(manifest):
        raise RecordDamagedError("undecodable body (not a manifest)")
    blocks = digests_of(manifest[BLOCKED_HEADER:end])
    rest = manifest[end:]
    empty = MapDigests((), ()) if kind == MAP_MARK else ListDigests(())
    return Blocked(kind, blocks, digests_in(kind, rest) if rest else empty)


def expanded(blocked: Blocked, opened: Sequence[tuple[str, bytes]]) -> ListDigests | MapDigests:
    """The digests (and a dict's keys) ``blocked`` names, its blocks ``opened`` (each
    verified against its digest: type and data): each must be a manifest of its kind
    with exactly ``BLOCK_ENTRIES`` entries, or ``RecordDamagedError``."""
    return with_tail(blocked, block_entries(blocked.kind, opened))


def block_entries(
    kind: str, opened: Sequence[tuple[str, bytes]]
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """The digests and keys (a list's: none) of the entries of blocks ``opened``, in
    order, each block checked as ``expanded`` says."""
    digests: list[bytes] = []
    keys: list[bytes] = []
    for type_, data in opened:
        if type_ != kind:
            raise RecordDamagedError("undecodable body (a block of another type)")
        block = digests_in(type_, data)
        if len(block) != BLOCK_ENTRIES:
            raise RecordDamagedError("undecodable body (a block of the wrong length)")
        digests += block
        keys += getattr(block, "keys", ())
    return tuple(digests), tuple(keys)


def with_tail(
    blocked: Blocked, entries: tuple[tuple[bytes, ...], tuple[bytes, ...]]
) -> ListDigests | MapDigests:
    """What ``blocked`` names, given its blocks' ``entries`` (``block_entries``)."""
    digests, keys = entries
    if blocked.kind == MAP_MARK:
        tail_keys = blocked.tail.keys  # type: ignore[attr-defined]
        return MapDigests((*digests, *blocked.tail), (*keys, *tail_keys), blocked.blocks)
    return ListDigests((*digests, *blocked.tail), blocked.blocks)


@dataclass(slots=True)  # not frozen: made per operation, and a frozen one costs 4x to make
class Split:
    """A list or dict value in element form: the manifest's type and data, and the
    stored elements (a dict's values; its keys are in the manifest), with the blocks
    naming its first entries where it is long (``blocks.py``; they are in ``stored``)."""

    digests: tuple[bytes, ...]  # in list order, or the dict's (repeats allowed)
    stored: dict[bytes, bytes]  # digest -> stored element, each once
    keys: tuple[bytes, ...] | None = None  # a dict's keys, each as msgpack packs it
    blocks: tuple[bytes, ...] = ()  # of BLOCK_ENTRIES entries each, from the first

    @property
    def kind(self) -> str:
        return MARK if self.keys is None else MAP_MARK

    @property
    def mark(self) -> str:
        return BLOCKED_MARK if self.blocks else self.kind

    @property
    def manifest(self) -> bytes:
        if self.blocks:
            tail = self.entries(len(self.blocks) * BLOCK_ENTRIES, len(self.digests))
            return blocked_manifest(self.kind, self.blocks, tail)
        return self.entries(0, len(self.digests))

    def entries(self, start: int, end: int) -> bytes:
        """The ``kind`` manifest of entries ``start`` to ``end`` (``b""``: none)."""
        if self.keys is None or start == end:
            return b"".join(self.digests[start:end])
        keys = self.keys[start:end]
        return b"".join((len(keys).to_bytes(4, "big"), *keys, *self.digests[start:end]))

    @property
    def named(self) -> ListDigests | MapDigests:
        """Its digests as a reader of its manifest finds them (with its blocks)."""
        if self.keys is None:
            return ListDigests(self.digests, self.blocks)
        return MapDigests(self.digests, self.keys, self.blocks)


MSGPACK = "msgpack"  # LangGraph's serialization type whose arrays are their elements' bytes


def msgpack_elements(whole: tuple[str, bytes], count: int) -> list[bytes] | None:
    """The bytes of each element of a list LangGraph serialized as one msgpack array
    (msgpack is context-free: an element's bytes are what serializing it alone gives),
    or None for another serialization. Only for what the serializer just made (a writer's
    split): an array of one is taken as all that follows its header, unparsed."""
    type_, data = whole
    if count == 1 and type_ == MSGPACK and data[:1] == b"\x91":
        return [data[1:]]  # an array of one: all that follows its one-byte header
    parts = _msgpack_parts(whole, count, per_entry=1, mapping=False)
    return None if parts is None else [entry[0] for entry in parts]


def msgpack_map_items(whole: tuple[str, bytes], count: int) -> list[tuple[bytes, bytes]] | None:
    """The (key, value) bytes of each entry of a dict LangGraph serialized as one msgpack
    map, or None for another serialization."""
    parts = _msgpack_parts(whole, count, per_entry=2, mapping=True)
    return None if parts is None else [(key, value) for key, value in parts]


def _msgpack_parts(
    whole: tuple[str, bytes], count: int, *, per_entry: int, mapping: bool
) -> list[tuple[bytes, ...]] | None:
    """The bytes of each of the ``count`` entries (``per_entry`` objects each) of a msgpack
    array or map that is the whole of ``whole``, or None."""
    type_, data = whole
    if type_ != MSGPACK:
        return None
    unpacker, base = _fed(data)
    try:
        header = unpacker.read_map_header() if mapping else unpacker.read_array_header()
        if header != count:
            return None
        return _done(unpacker, base, data, _entries(unpacker, base, data, 0, count, per_entry))
    except (ValueError, msgpack.UnpackException):
        return None


def msgpack_tail(
    data: bytes, start: int, count: int, per_entry: int
) -> list[tuple[bytes, ...]] | None:
    """The bytes of the ``count`` entries (``per_entry`` objects each) that ``data`` holds
    from ``start`` to its very end, or None (``split_memo.py``: what follows the entries
    a put split before)."""
    tail = data[start:]
    unpacker, base = _fed(tail)
    try:
        return _done(unpacker, base, tail, _entries(unpacker, base, data, start, count, per_entry))
    except (ValueError, msgpack.UnpackException):
        return None


def _entries(
    unpacker: msgpack.Unpacker, base: int, data: bytes, fed_from: int, count: int, per_entry: int
) -> list[tuple[bytes, ...]] | None:
    """The next ``count`` entries ``unpacker`` (fed ``data[fed_from:]`` at its stream
    position ``base``) holds, which must end exactly where ``data`` does."""
    offset = fed_from - base
    entries, start = [], offset + unpacker.tell()
    for _ in range(count):
        bounds = [start]
        for _ in range(per_entry):
            unpacker.skip()
            bounds.append(offset + unpacker.tell())
        entries.append(tuple(data[a:b] for a, b in pairwise(bounds)))
        start = bounds[-1]
    return entries if start == len(data) else None


class _Reused(threading.local):
    """The Unpacker a thread reuses for inputs under ``REUSED_BELOW`` bytes: making one
    zeroes its parse stack (~40 KB: 42k machine instructions, two a superstep)."""

    unpacker: msgpack.Unpacker | None = None


_REUSED = _Reused()
REUSED_BELOW = 1 << 16  # its buffer, kept for the thread's life


def _fed(data: bytes) -> tuple[msgpack.Unpacker, int]:
    """An Unpacker fed ``data``, and the stream position ``data`` starts at. A short
    input takes the thread's reused one (empty: ``_done``), so a use within a use makes
    its own; a long one gets its own, sized to it."""
    if len(data) < REUSED_BELOW:
        unpacker, _REUSED.unpacker = _REUSED.unpacker, None
        if unpacker is None:
            unpacker = msgpack.Unpacker(max_buffer_size=REUSED_BELOW)
    else:
        unpacker = msgpack.Unpacker(max_buffer_size=len(data) + 1)
    base = unpacker.tell()
    unpacker.feed(data)
    return unpacker, base


def _done(unpacker: msgpack.Unpacker, base: int, data: bytes, result: Any) -> Any:
    """``result``; an Unpacker that read ``data`` to its very end goes back to be reused
    (one that stopped short, or raised, holds the rest: it is dropped)."""
    if len(data) < REUSED_BELOW and unpacker.tell() - base == len(data):
        _REUSED.unpacker = unpacker
    return result


def joined_map(
    keys: Sequence[bytes], types: Sequence[str], parts: Sequence[bytes]
) -> tuple[str, bytes]:
    """The msgpack map of ``keys`` (as msgpack packs them) and their values serialized one
    by one as msgpack: what the dict serialized whole was (one call deserializes it)."""
    if types.count(MSGPACK) != len(types) or len(keys) != len(parts):
        raise RecordDamagedError("undecodable body (a dict element not msgpack)")
    entries = b"".join(b"".join(pair) for pair in zip(keys, parts))
    return MSGPACK, b"\xdf" + len(parts).to_bytes(4, "big") + entries


def joined(types: Sequence[str], parts: Sequence[bytes]) -> tuple[str, bytes] | None:
    """The msgpack array of elements serialized one by one as msgpack (their types and
    bytes): one call deserializes them all (the inverse of ``msgpack_elements``); None
    if one is not msgpack."""
    if types.count(MSGPACK) != len(types):
        return None
    return MSGPACK, b"".join((b"\xdd" + len(parts).to_bytes(4, "big"), *parts))


def digests_in(type_: str, manifest: Any) -> tuple[bytes, ...]:
    """The element digests a verified manifest of type ``type_`` names, in order (a
    dict's: ``MapDigests``, with its keys); ``RecordDamagedError`` if it is not one."""
    if type_ == MAP_MARK:
        return _map_digests(manifest)
    return digests_of(manifest)


def _map_digests(manifest: Any) -> MapDigests:
    """A dict's manifest: its entry count (4 bytes), its keys as msgpack packs them, then
    one digest per entry; anything else is damage."""
    if not isinstance(manifest, bytes) or len(manifest) < 4:
        raise RecordDamagedError("undecodable body (not a manifest)")
    count = int.from_bytes(manifest[:4], "big")
    keys_end = len(manifest) - count * DIGEST_BYTES
    if count == 0 or keys_end < 4:
        raise RecordDamagedError("undecodable body (not a manifest)")
    keys: list[bytes] = []
    packed_keys = manifest[4:keys_end]
    unpacker, base = _fed(packed_keys)
    try:
        start = 0
        for _ in range(count):
            unpacker.skip()
            end = unpacker.tell() - base
            keys.append(manifest[4 + start : 4 + end])
            start = end
        _done(unpacker, base, packed_keys, None)
    except (ValueError, msgpack.UnpackException) as exc:
        raise RecordDamagedError("undecodable body (not a manifest)") from exc
    if 4 + start != keys_end:
        raise RecordDamagedError("undecodable body (not a manifest)")
    digests = manifest[keys_end:]
    return MapDigests(_cut(digests), tuple(keys))


def with_digests(type_: str, manifest: bytes, digests: Sequence[bytes]) -> bytes:
    """``manifest`` naming ``digests`` instead (a re-keyed manifest: resign.py)."""
    if type_ == MAP_MARK:
        return manifest[: len(manifest) - len(digests) * DIGEST_BYTES] + b"".join(digests)
    return b"".join(digests)


def digests_of(manifest: Any) -> ListDigests:
    """The element digests a verified manifest's data names, in order."""
    if not isinstance(manifest, bytes) or len(manifest) % DIGEST_BYTES:
        raise RecordDamagedError("undecodable body (not a manifest)")
    return ListDigests(_cut(manifest))


def _cut(data: bytes) -> list[bytes]:
    """``data`` in ``DIGEST_BYTES`` pieces (the last one short if its length is no
    multiple, as slicing gives), sliced in C: a read cuts every message's digest out of
    its manifest."""
    n = len(data)
    return list(
        map(
            data.__getitem__,
            map(
                slice,
                range(0, n, DIGEST_BYTES),
                range(DIGEST_BYTES, n + DIGEST_BYTES, DIGEST_BYTES),
            ),
        )
    )


def may_be_manifest(record: bytes | None, window: int = 96) -> bool:
    """Cheap test before opening: a manifest's type sits at the start of a channel
    value's body (``window``), after the channel name in a pending write's (search it
    all: ``window=-1``)."""
    if record is None:
        return False
    end = len(record) if window < 0 else window
    return any(record.find(mark, 0, end) != -1 for mark in PACKED_MARKS)
